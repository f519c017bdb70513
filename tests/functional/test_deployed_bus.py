# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The bus as deployment tools set it for every service: RabbitMQ over TLS (verified
against the stack's own certificate authority), quorum queues and oslo.messaging's queue
manager, for Ironic and the agents alike.  The agents name it as every service does,
``[DEFAULT] transport_url`` and ``[oslo_messaging_rabbit]``; the notification fast
path and the shared listing run on it as they run on the plain bus (the same tests,
on a stack of this shape of their own)."""

import pytest

from tests.functional import conftest
from tests.functional import test_agent
from tests.functional import test_ring
from tools.localstack import rabbitmq
from tools.wait import wait_for

pytestmark = pytest.mark.functional


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    yield from conftest.running_stack(tmp_path_factory, bus="tls-quorum")


# The fixtures test_ring's shared-listing test runs with, over this module's stack.
backend = test_ring.backend
fleet_of = test_ring.fleet_of

test_fast_path_on_the_deployed_bus = test_agent.test_fast_path_carries_each_kind_of_change
test_shared_listing_on_the_deployed_bus = (
    test_ring.test_one_member_lists_for_the_ring_and_drift_is_still_repaired_in_an_interval)


def rows(stack, *args):
    done = rabbitmq.ctl(stack, *args, "--quiet", "--no-table-headers", check=True)
    return [line.split("\t") for line in done.stdout.splitlines() if line.strip()]


def test_every_client_is_on_tls_and_the_agents_queues_are_quorum(stack, agents, shard):
    agent = agents(name="tls-agent")
    conf = agent.conf.read_text()
    assert "transport_url = rabbit://" in conf and "[notifications]" not in conf
    wait_for(lambda: ["rp_reporter.tls-agent", "quorum"] in rows(stack, "list_queues",
                                                                   "name", "type"),
             30, "the agent's listener pool as a quorum queue")
    connections = rows(stack, "list_connections", "ssl", "port")
    assert connections and all(ssl == "true" for ssl, _ in connections), connections
    assert {port for _, port in connections} == {str(stack.ports["rabbitmq_tls"])}
