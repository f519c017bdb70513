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

"""An agent's first pass waits for the ring the agents started together end up with."""

import threading
import time

from rp_reporter import conf as rp_conf
from rp_reporter import membership as rp_membership
from rp_reporter.agent import ownership as rp_ownership

HEARTBEAT = 0.1  # the least [coordination] heartbeat allows


class Joining:
    """A membership whose ticks show the agents joining one by one, then holding."""
    fenced = False
    changes_at_run_time = True

    def __init__(self, *rings):
        self.rings = list(rings)

    def start(self):
        pass

    def tick(self):
        return self.rings.pop(0) if len(self.rings) > 1 else self.rings[0]


def ownership(tmp_path, *rings):
    path = tmp_path / "rp.conf"
    path.write_text(f"[DEFAULT]\nhost = a\n[coordination]\nheartbeat = {HEARTBEAT}\n")
    return rp_ownership.Ownership(rp_conf.load(["--config-file", str(path)]), Joining(*rings))


def renewing(owner, stopping):
    thread = threading.Thread(target=owner.renew, args=(stopping, lambda taken: None),
                              daemon=True)
    thread.start()
    return thread


def test_the_first_pass_waits_for_the_ring_to_hold(tmp_path):
    owner = ownership(tmp_path, {"a"}, {"a", "b"}, {"a", "b", "c"}, {"a", "b", "c", "d"})
    stopping = threading.Event()
    thread = renewing(owner, stopping)
    owner.joined.wait(1)
    started = time.monotonic()
    owner.settle(quiet=3 * HEARTBEAT, limit=5, stopping=stopping)
    stopping.set()
    thread.join(1)
    assert owner.ring.members == {"a", "b", "c", "d"}  # not a ring seen on the way
    assert time.monotonic() - owner.ring_changed >= 3 * HEARTBEAT
    assert time.monotonic() - started < 2  # and no longer than it takes to hold


def test_an_agent_that_first_sees_itself_alone_waits_for_the_others(tmp_path):
    """Its ring of {itself} is no change, but a first pass on it lists the whole fleet
    as its own (seen at 10^5 nodes beside three other agents started with it)."""
    owner = ownership(tmp_path, {"a"}, {"a"}, {"a", "b"})
    owner.ring_changed -= 100  # a long start (restoring its saved observations)
    stopping = threading.Event()
    thread = renewing(owner, stopping)
    owner.joined.wait(1)
    assert owner.ring.members == {"a"}
    owner.settle(quiet=3 * HEARTBEAT, limit=5, stopping=stopping)
    stopping.set()
    thread.join(1)
    assert owner.ring.members == {"a", "b"}


def test_a_ring_that_keeps_changing_waits_no_longer_than_the_limit(tmp_path):
    rings = [{"a"} | {f"m{i}" for i in range(n)} for n in range(1000)]
    owner = ownership(tmp_path, *rings)
    stopping = threading.Event()
    thread = renewing(owner, stopping)
    owner.joined.wait(1)
    started = time.monotonic()
    owner.settle(quiet=10 * HEARTBEAT, limit=0.3, stopping=stopping)
    waited = time.monotonic() - started
    stopping.set()
    thread.join(1)
    assert 0.3 <= waited < 0.3 + 5 * HEARTBEAT


def test_a_fixed_ring_starts_at_once(tmp_path):
    """Alone or with static peers the ring never changes: nothing to wait for (the
    wait would cost every such start three heartbeats)."""
    for fixed in (rp_membership.Alone("a"), rp_membership.StaticPeers("a", ["b", "c"])):
        path = tmp_path / "rp.conf"
        path.write_text("[DEFAULT]\nhost = a\n[coordination]\nheartbeat = 1\n")
        owner = rp_ownership.Ownership(rp_conf.load(["--config-file", str(path)]), fixed)
        stopping = threading.Event()
        thread = renewing(owner, stopping)
        owner.joined.wait(1)
        started = time.monotonic()
        owner.settle(quiet=3, limit=10, stopping=stopping)
        waited = time.monotonic() - started
        stopping.set()
        thread.join(2)
        assert owner.ring.members == fixed.members()
        assert waited < 0.5, (type(fixed).__name__, waited)
