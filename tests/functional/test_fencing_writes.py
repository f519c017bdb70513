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

"""No write leaves an agent after its fencing deadline, however long a sync under
way keeps retrying: measured at a proxy in front of the real Placement, with the
agent's real Redis frozen mid-sync (every renewal then hangs until it times out)."""

import json
import signal
import time

import pytest

from tests.functional.agents import inventory
from tests.functional.proxy import Proxy
from tests.functional.redis_server import Redis
from tools.wait import wait_for

pytestmark = pytest.mark.functional
LEASE, HEARTBEAT = 3.0, 0.5
IN_FLIGHT = 0.2  # a write sent just before the deadline may arrive this much later
UNAVAILABLE = (503, json.dumps({"errors": [{"status": 503, "title": "unavailable"}]}).encode())


@pytest.fixture
def redis(stack, tmp_path):
    server = Redis(tmp_path).start()
    yield server
    server.stop()


@pytest.fixture
def placement_proxy(stack):
    proxy = Proxy(stack.placement_url)
    yield proxy
    proxy.close()


def test_a_sync_that_loses_its_lease_mid_write_writes_nothing_after_the_deadline(
        agents, ironic, placement, redis, placement_proxy):
    node = ironic.create(resource_class="baremetal-gold")
    agent = agents(coordination={"backend_url": redis.url, "lease": LEASE,
                                 "heartbeat": HEARTBEAT},
                   placement={"endpoint": placement_proxy.url,
                              "request_attempts": 10_000, "request_backoff_max": 0.1})
    wait_for(lambda: inventory(placement, node), 30, "the provider")

    # Placement refuses writes: the fast path's sync of this change retries them.
    placement_proxy.answer = lambda method, path: UNAVAILABLE if method != "GET" else None
    ironic.set_maintenance(node, True)
    wait_for(lambda: len(placement_proxy.writes()) >= 5, 20, "the sync retrying its write")

    redis.freeze()  # no renewal gets through from now on
    deadline = time.monotonic() + LEASE - HEARTBEAT  # at the latest: the last renewal was earlier
    time.sleep(3 * LEASE)
    writes = [t for t, _, _ in placement_proxy.writes()]
    late = [round(t - deadline, 3) for t in writes if t > deadline + IN_FLIGHT]
    assert not late, f"writes after the fencing deadline (s after it): {late}"
    assert any(t > deadline - LEASE for t in writes)  # it was still writing near the deadline
    assert agent.health()[0] == 503

    # Back: membership renewed, writes accepted, the change reaches Placement.
    placement_proxy.answer = None
    redis.freeze(False)
    wait_for(lambda: (inventory(placement, node) or {}).get("CUSTOM_BAREMETAL_GOLD") == (1, 1, 1),
             6 * LEASE, "the change (reserved), once a member again")
    assert agent.stop(signal.SIGTERM) == 0
