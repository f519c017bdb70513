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

"""The agent outlives every way a coordination backend fails, as a real process
on a real Redis of its own: refused connections (Redis stopped), timeouts (Redis
frozen, so calls hang until the client's socket timeout), ``READONLY`` (Redis
turned into a replica, as during a failover), and a backend that is down when
the agent starts.  After each, the agent is a member again, healthy, and a node
changed during the fault reaches Placement.

Each fault lasts until the backend's client gives up and raises (tooz's redis
driver retries a refused connection for about a minute, a timeout for several
socket timeouts; READONLY at once), since an error is what must not kill the
agent's membership."""

import time

import pytest

from tests.functional.agents import inventory
from tests.functional.redis_server import Redis
from tools import localstack
from tools.wait import wait_for

pytestmark = pytest.mark.functional
LEASE, HEARTBEAT = 3, 0.5


@pytest.fixture
def redis(stack, tmp_path):  # stack: redis-server is installed with it
    server = Redis(tmp_path)
    yield server
    server.stop()


def start_agent(agents, redis, wait_healthy=True):
    return agents(coordination={"backend_url": redis.url, "lease": LEASE,
                                "heartbeat": HEARTBEAT},
                  agent={"retry_backoff_max": 1}, wait_healthy=wait_healthy)


def refuse(redis):
    redis.stop()
    return lambda: redis.start()


def time_out(redis):
    redis.freeze()  # every call hangs until the client's socket timeout
    return lambda: redis.freeze(False)


def read_only(redis):
    # A replica of a master that is not there: every write answers READONLY.
    redis.cli("REPLICAOF", "127.0.0.1", str(localstack.free_port()))
    return lambda: redis.cli("REPLICAOF", "NO", "ONE")


@pytest.mark.parametrize("fault, seconds", [(refuse, 75), (time_out, 40), (read_only, 10)],
                         ids=["refused", "timing-out", "read-only"])
def test_the_agent_outlives_a_backend_fault_and_resyncs(fault, seconds, redis, agents, ironic,
                                                        placement):
    redis.start()
    node = ironic.create(resource_class="baremetal-gold")
    agent = start_agent(agents, redis)
    wait_for(lambda: inventory(placement, node), 30, "the provider")

    began = time.monotonic()
    end_fault = fault(redis)
    wait_for(lambda: agent.health()[0] == 503, 3 * LEASE, "fenced: /healthz 503")
    ironic.patch(node, resource_class="baremetal-silver")  # while it writes nothing
    wait_for(lambda: "coordination backend membership not renewed" in agent.output(), seconds,
             "the backend's error, reported")
    time.sleep(max(0, began + seconds - time.monotonic()))
    assert agent.proc.poll() is None
    assert "CUSTOM_BAREMETAL_SILVER" not in (inventory(placement, node) or {})

    end_fault()
    wait_for(agent.healthy, 6 * LEASE, "a member again: /healthz 200")
    wait_for(lambda: "CUSTOM_BAREMETAL_SILVER" in (inventory(placement, node) or {}), 30,
             "the change made while fenced")
    output = agent.output()
    assert "Traceback" not in output and "TypeError" not in output
    assert output.count("coordination backend membership not renewed") == 1, output
    assert output.count("fenced: membership not renewed in time") == 1, output


def test_an_agent_started_while_the_backend_is_down_joins_when_it_answers(
        redis, agents, ironic, placement):
    node = ironic.create(resource_class="baremetal-gold")
    agent = start_agent(agents, redis, wait_healthy=False)
    wait_for(lambda: "not a member yet" in agent.health()[1], 3 * LEASE,
             "/healthz: not a member yet")
    assert agent.health()[0] == 503
    time.sleep(2 * LEASE)
    assert agent.proc.poll() is None and inventory(placement, node) is None  # writes nothing

    redis.start()
    wait_for(agent.healthy, 90, "joined: /healthz 200")  # once the client's retries connect
    wait_for(lambda: inventory(placement, node), 30, "the provider")
    assert "Traceback" not in agent.output()
