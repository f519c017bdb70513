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

"""rp_reporter.rehoming: who is fenced, which nodes a survivor moves, and which builds
queued to a fenced service it ends (pure)."""

import types

from tooz import hashring

from rp_reporter import rehoming


def test_fenced_takes_both_the_lease_and_nova():
    up = {"compute-1": True, "compute-2": False, "compute-3": False, "compute-4": True}
    live = {"compute-1", "compute-3"}
    # compute-2: lease gone and nova says down.  compute-3: nova says down but its
    # lease is live (nova's report is late, or it is forced down by mistake): not
    # fenced.  compute-4: lease gone but nova sees it up: partitioned, not dead.
    assert rehoming.fenced_services(up, live, "compute-1") == ["compute-2"]


def test_a_service_never_fences_itself_and_hosts_compare_without_case():
    up = {"Compute-1": False, "compute-2": False}
    assert rehoming.fenced_services(up, {"COMPUTE-2"}, "compute-1") == []


def test_a_service_held_down_on_purpose_is_not_fenced_until_its_hold_ends():
    up = {"compute-2": False, "compute-3": False}
    holds = {"compute-2": 1000, "compute-3": 500}
    ends = rehoming.hold_ends(holds, {}, now=600, monotonic_now=50)
    held = rehoming.held_now(ends, monotonic_now=50)
    assert held == {"compute-2"}  # compute-3's hold ended at 500
    assert rehoming.fenced_services(up, set(), "compute-1", held) == ["compute-3"]
    assert rehoming.fenced_services(up, set(), "compute-1", rehoming.held_now(
        ends, monotonic_now=450)) == ["compute-2", "compute-3"]  # a hold ends at its bound
    assert rehoming.fenced_services({"Compute-2": False}, set(), "compute-1",
                                    {"compute-2"}) == []


def test_a_hold_once_read_ends_by_the_movers_monotonic_clock_not_its_wall_clock():
    holds = {"compute-2": 1000}
    ends = rehoming.hold_ends(holds, {}, now=600, monotonic_now=50)  # 400 s left
    # the wall clock stepped an hour ahead, the monotonic clock 10 s on
    ends = rehoming.hold_ends(holds, ends, now=600 + 3600, monotonic_now=60)
    assert rehoming.held_now(ends, monotonic_now=60) == {"compute-2"}
    assert rehoming.held_now(ends, monotonic_now=450) == set()  # not lengthened either
    # a new bound (the operator held it again) is a new hold, read now
    ends = rehoming.hold_ends({"compute-2": 5000}, ends, now=600, monotonic_now=450)
    assert rehoming.held_now(ends, monotonic_now=460) == {"compute-2"}
    assert rehoming.hold_ends({}, ends, now=600, monotonic_now=460) == {}  # released


def test_only_the_nodes_this_service_owns_are_moved_one_instance_each():
    instances = [("n2", "i2"), ("n1", "i1"), ("n3", "i3a"), ("n3", "i3b"), (None, "i4")]
    owned = {"n1", "n3"}
    moves = rehoming.nodes_to_move(instances, owned.__contains__)
    assert moves == [("n1", ["i1"])]  # n2: another's; n3: two instances; i4: no node
    assert rehoming.refused(instances) == {"n3": 2}


def test_the_report_watch_calls_down_only_what_it_saw_stall_for_the_whole_time():
    watch = rehoming.ReportWatch(20)
    # First sight: never down, whatever nova's wall clock says.
    assert not watch.down("a", (7, "t7"), False, nova_says_up=False, now=100)
    assert not watch.down("a", (7, "t7"), False, nova_says_up=False, now=119.9)
    assert watch.down("a", (7, "t7"), False, nova_says_up=False, now=120)
    # It reported again: the count starts over.
    assert not watch.down("a", (8, "t8"), False, nova_says_up=False, now=125)
    assert not watch.down("a", (8, "t8"), False, nova_says_up=False, now=140)


def test_a_skewed_clock_never_fences_a_service_whose_reports_go_on():
    """A watcher whose wall clock is ahead by more than service_down_time: nova's own
    answer is "down" for every service; one that goes on reporting is never down."""
    watch = rehoming.ReportWatch(20)
    for step in range(10):
        assert not watch.down("b", (step, None), False, nova_says_up=False, now=step * 10)


def test_nova_saying_up_keeps_a_stalled_service_up_and_forced_down_is_down_at_once():
    watch = rehoming.ReportWatch(20)
    watch.down("c", (1, None), False, nova_says_up=True, now=0)
    assert not watch.down("c", (1, None), False, nova_says_up=True, now=60)
    assert rehoming.ReportWatch(20).down("d", (1, None), True, nova_says_up=True, now=0)


def test_a_driver_refuses_a_server_homed_elsewhere_or_while_forced_down():
    assert rehoming.refusal("compute-a", "Compute-A", False) is None
    assert "homed on compute-b" in rehoming.refusal("compute-b", "compute-a", False)
    assert "no service" in rehoming.refusal(None, "compute-a", False)
    assert "forced down" in rehoming.refusal("compute-a", "compute-a", True)


def test_the_nodes_taken_over_from_a_service_that_left_name_it():
    def ring_of(members):
        return hashring.HashRing(sorted(members))
    nodes = [f"node-{i}" for i in range(60)]
    before, now = {"compute-1", "compute-2", "compute-dead"}, {"Compute-1", "compute-2"}
    mine_now = {n for n in nodes if "compute-1" in ring_of({m.lower() for m in now})
                .get_nodes(n.encode())}
    mine_before = {n for n in nodes if "compute-1" in ring_of(before).get_nodes(n.encode())}
    taken = rehoming.taken_from_the_departed(mine_now - mine_before, before, now, ring_of)
    assert taken and set(taken.values()) == {"compute-dead"}
    assert set(taken) == mine_now - mine_before  # all of them: compute-2 kept its own
    assert rehoming.taken_from_the_departed(mine_now, None, now, ring_of) == {}  # a start
    joined = rehoming.taken_from_the_departed(mine_now, now, now | {"compute-3"}, ring_of)
    assert joined == {}  # a rebalance among live members: nobody left


def test_a_queued_build_is_ended_if_no_service_took_it_and_given_back_once_ended():
    def build(vm_state, host=None):
        return types.SimpleNamespace(vm_state=vm_state, host=host)
    assert rehoming.queued_build_step(build("building")) == "end"
    assert rehoming.queued_build_step(build("error")) == "give back"  # a round failed
    for settled in (build("building", "compute-1"), build("error", "compute-1"),
                    build("active", "compute-1"), build("deleted")):
        assert rehoming.queued_build_step(settled) is None
