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

"""Fencing: writes stop at the deadline and a renewal after it resyncs, even when
one blocked renewal spans the whole lapse (tooz's redis driver retries a call
for tens of seconds while Redis is down, so no tick sees the agent fenced)."""

import threading
import time

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import membership
from tools.wait import wait_for

HEARTBEAT = 0.1


class Membership:
    """What the agent reads of its membership, set by the test."""
    fenced = False
    lapses = 0


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    f"[coordination]\nheartbeat = {HEARTBEAT}\n"
                    "[agent]\nworkers = 1\n")  # one worker: the order of syncs is the queue's
    agent = rp_agent.Agent(rp_conf.load(["--config-file", str(path)]))
    agent.ownership.membership = agent.membership = Membership()
    agent.synced = []
    agent.queue.start(agent.synced.append)
    watcher = threading.Thread(target=agent.ownership.watch_fencing, daemon=True,
                               args=(agent.stopping, agent.queue.pause, agent.resync_now.set))
    watcher.start()
    yield agent
    agent.stopping.set()
    agent.queue.stop(timeout=1)
    watcher.join(1)


def test_nothing_lapsed_nothing_to_resync(agent):
    time.sleep(4 * HEARTBEAT)
    assert not agent.resync_now.is_set()


def test_a_lapse_inside_one_blocked_renewal_still_resyncs(agent):
    time.sleep(2 * HEARTBEAT)
    agent.membership.lapses = 1  # renewed after the deadline; never seen fenced
    wait_for(agent.resync_now.is_set, 3, "a resync")


def test_writes_stop_while_fenced_and_resume_with_a_resync(agent):
    agent.membership.fenced = True
    time.sleep(3 * HEARTBEAT)
    agent.queue.add("node-1")
    time.sleep(3 * HEARTBEAT)
    assert agent.synced == [] and not agent.resync_now.is_set()
    agent.membership.fenced, agent.membership.lapses = False, 1
    wait_for(lambda: agent.synced == ["node-1"], 3, "the held sync")
    assert agent.resync_now.is_set()


def test_a_renewal_after_the_deadline_counts_a_lapse(tmp_path):
    group = membership.Group(f"file://{tmp_path}", "rp", "me", heartbeat=0.1,
                             lease=1.0).start()
    try:
        group.tick()
        assert not group.fenced and group.lapses == 0
        time.sleep(0.95)  # past lease - heartbeat: writes stop here
        assert group.fenced
        group.tick()
        assert not group.fenced and group.lapses == 1
        group.tick()
        assert group.lapses == 1
    finally:
        group.stop()


def test_a_renewal_that_finds_the_member_gone_from_the_backend_counts_a_lapse(tmp_path):
    """The backend's word: expired there while this process's clock stood still (a VM
    paused by its hypervisor), so the deadline never passed by that clock."""
    group = membership.Group(f"file://{tmp_path}", "rp", "me", heartbeat=0.1,
                             lease=10.0).start()
    try:
        group.tick()
        group._coordinator.leave_group(group.group).get()  # the backend dropped it
        group.tick()
        assert not group.fenced and group.lapses == 1
        assert "me" in group.members()  # a member again
        group.tick()
        assert group.lapses == 1
    finally:
        group.stop()


def test_a_node_changed_while_another_agent_owned_it_goes_first_after_a_takeover(agent):
    agent.conf.set_override("host", "me")
    ownership = agent.ownership
    ownership.ring = ownership.ring_of({"me", "dead"})
    theirs = next(f"node-{i}" for i in range(100) if ownership.ring.owner(f"node-{i}") == "dead")
    mine = next(f"node-{i}" for i in range(100) if ownership.ring.owner(f"node-{i}") == "me")
    agent.controller.on_notification(theirs, "baremetal.node.update.end", None)  # not ours: dropped
    assert agent.synced == []
    agent.queue.pause(True)
    agent.queue.add(mine)  # a resync's key, queued before the takeover
    ownership.ring = ownership.ring_of({"me"})  # "dead" left the group
    agent.controller.on_members_changed(ownership.take_over_recent_events())
    agent.queue.pause(False)
    wait_for(lambda: len(agent.synced) == 2, 3, "both synced")
    assert agent.synced == [theirs, mine]  # the recently changed node first


def test_one_member_at_a_time_holds_a_lock_and_a_fenced_one_never(tmp_path):
    """The re-homing job's lock per node (file:// backend: one machine's tooz)."""
    a = membership.Group(f"file://{tmp_path}", "rp", "a", heartbeat=0.1, lease=1.0).start()
    b = membership.Group(f"file://{tmp_path}", "rp", "b", heartbeat=0.1, lease=1.0).start()
    try:
        with a.lock("rehome-n1") as held_a:
            with b.lock("rehome-n1") as held_b:
                assert (held_a, held_b) == (True, False)
            with b.lock("rehome-n2") as other:
                assert other  # another node's lock is another lock
        with b.lock("rehome-n1") as held_b:
            assert held_b  # released when a's move ended
        time.sleep(0.95)  # a's lease lapses (no tick): fenced, it takes no lock
        assert a.fenced
        with a.lock("rehome-n3") as held_a:
            assert not held_a
    finally:
        a.stop()
        b.stop()


def test_a_renewal_is_counted_from_before_it_was_sent(tmp_path, monkeypatch):
    """The backend starts the lease when a renewal arrives, later than it was sent: a
    renewal that blocked for most of a lease leaves only what remained from its send."""
    group = membership.Group(f"file://{tmp_path}", "rp", "me", heartbeat=0.1,
                             lease=1.0).start()
    try:
        heartbeat = group._coordinator.heartbeat

        def slow():
            time.sleep(0.6)
            return heartbeat()
        monkeypatch.setattr(group._coordinator, "heartbeat", slow)
        group.tick()
        # Stamped at the send: 0.9 s of writing time less the 0.6 s the call took.
        assert group._time_left() < 0.35
    finally:
        group.stop()


def test_a_member_the_backend_dropped_is_fenced_as_soon_as_a_writer_asks(tmp_path):
    """A pause its clocks did not see (a VM pause): the next renewal would find out, a
    heartbeat later; a writer that asks the backend first finds out now."""
    group = membership.Group(f"file://{tmp_path}", "rp", "me", heartbeat=0.1,
                             lease=10.0).start()
    try:
        assert group.confirm() and not group.fenced
        group._coordinator.leave_group(group.group).get()  # the backend dropped it
        assert not group.fenced  # by its own clock: nothing happened
        assert not group.confirm()
        assert group.fenced and group.lapses == 0
        group.tick()  # the renewal: a member again, the lapse counted
        assert not group.fenced and group.lapses == 1 and group.confirm()
    finally:
        group.stop()
