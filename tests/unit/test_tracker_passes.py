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

"""rp_reporter.tracker_passes: which nodes nova's resource-tracker periodic goes over (pure)."""

from hypothesis import given
from hypothesis import strategies as st

from rp_reporter import tracker_passes

INTERVAL = 60.0


def look(passes, managed, now):
    """A periodic at ``now``: nova looks at the due nodes; which ones."""
    due = passes.due(managed, now)
    for uuid in due:
        passes.looked_at(uuid, managed[uuid], now)
    return due


def test_one_is_novas_behaviour_every_node_every_periodic():
    passes = tracker_passes.TrackerPasses(1, INTERVAL)
    managed = {"a": 1, "b": 1}
    for now in (0, 1, 60):
        assert look(passes, managed, now) == ["a", "b"]
    assert not passes.enabled


def test_between_full_passes_only_new_and_changed_nodes_are_due():
    passes = tracker_passes.TrackerPasses(3, INTERVAL)
    assert look(passes, {"a": 1, "b": 1}, 0) == ["a", "b"]  # the start: every node
    assert look(passes, {"a": 1, "b": 1}, 60) == []  # nothing happened to either
    # b changed in Ironic, c is new here (a takeover, a ring change, a new node).
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 120) == ["b", "c"]
    assert passes.next_aged_in({"a": 1, "b": 2, "c": 1}, 120) == 1
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 180) == ["a"]  # unlooked-at for 150 s
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 240) == []
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 300) == ["b", "c"]


def test_asking_changes_nothing():
    passes = tracker_passes.TrackerPasses(10, INTERVAL)
    look(passes, {"a": 1, "b": 1}, 0)
    for now in range(60, 570, 5):
        assert passes.due({"a": 1, "b": 2}, now) == ["b"]
    assert passes.due({"a": 1, "b": 1}, 569) == []


def test_the_clock_decides_not_the_number_of_periodics():
    passes = tracker_passes.TrackerPasses(4, INTERVAL)
    look(passes, {"a": 1}, 0)
    for now in range(1, 210):  # however many periodics: due after 3.5 intervals
        assert look(passes, {"a": 1}, now) == []
    assert look(passes, {"a": 1}, 210) == ["a"]


def test_a_node_nova_alone_knows_changed_is_due_at_its_next_two_looks():
    passes = tracker_passes.TrackerPasses(10, INTERVAL)
    look(passes, {"a": 1, "b": 1}, 0)
    passes.touched({"a"})
    assert passes.due({"a": 1, "b": 1}, 1) == ["a"]  # asking changes nothing
    assert look(passes, {"a": 1, "b": 1}, 60) == ["a"]
    assert look(passes, {"a": 1, "b": 1}, 120) == ["a"]
    assert look(passes, {"a": 1, "b": 1}, 180) == []


def test_every_node_is_due_once_the_services_disabled_flag_changed():
    """nova writes the flag into each provider (COMPUTE_STATUS_DISABLED) at its look: a
    periodic under way when the service was enabled wrote the old trait back, and no
    node was due until the full pass (101.7 s not offered in the upgrade's run)."""
    passes = tracker_passes.TrackerPasses(10, INTERVAL)
    managed = {"a": 1, "b": 1}
    assert passes.service_status(True) is False  # the first read: nothing to compare
    look(passes, managed, 0)
    assert passes.service_status(True) is False
    assert look(passes, managed, 60) == []
    assert passes.service_status(None) is False  # not read: nothing known changed
    assert passes.service_status(False) is True  # enabled since the last periodic
    assert look(passes, managed, 120) == ["a", "b"]
    assert passes.service_status(False) is False
    assert look(passes, managed, 180) == ["a", "b"]  # a touch's second look
    assert look(passes, managed, 240) == []


def test_a_node_that_leaves_and_comes_back_is_due_again():
    passes = tracker_passes.TrackerPasses(10, INTERVAL)
    look(passes, {"a": 1, "b": 1}, 0)
    # Gone from this service's nodes for a while (another service's): due on return.
    passes.keep_only({"a": 1})
    assert look(passes, {"a": 1}, 60) == []
    assert look(passes, {"a": 1, "b": 1}, 120) == ["b"]
    # Released and taken back between two periodics (the renewals saw a ring change):
    # another service's resource tracker may have its record meanwhile.
    passes.forget({"b"})
    assert look(passes, {"a": 1, "b": 1}, 180) == ["b"]


def test_the_least_recently_looked_at_node():
    passes = tracker_passes.TrackerPasses(10, INTERVAL)
    assert passes.least_recent({}) is None
    look(passes, {"a": 1}, 0)
    look(passes, {"a": 1, "b": 1}, 60)
    assert passes.least_recent({"a": 1, "b": 1}) == "a"
    assert passes.least_recent({"a": 1, "b": 1, "c": 1}) == "c"  # never looked at
    assert passes.aged({"a": 1, "b": 1}, 570) == 1
    assert passes.next_aged_in({"a": 1, "b": 1}, 120) == 8


def test_a_node_is_due_for_its_age_only_once_a_whole_listing_since_novas_look_is_taken():
    """Where the fleet is listed whole only now and then, a node nova has not looked at
    for long is due once the fleet comes from a whole listing started after that look
    (only such a listing sees the node deleted); new and changed nodes are due at once."""
    passes = tracker_passes.TrackerPasses(3, INTERVAL)  # due for age after 150 s
    passes.whole_listed(0)  # the service's start
    assert look(passes, {"a": 1, "b": 1}, 1) == ["a", "b"]
    assert look(passes, {"a": 1, "b": 1, "c": 1}, 100) == ["c"]  # new here
    # a and b not looked at for 159 s, but no whole listing since: not due yet
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 160) == ["b"]  # b changed
    assert passes.aged({"a": 1, "b": 2, "c": 1}, 160) == 0
    passes.whole_listed(155)  # one started after nova's looks at a and c, taken
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 170) == ["a"]
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 260) == ["c"]  # looked at 100, before 155
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 330) == []  # b, a: looked at after 155
    passes.whole_listed(320)
    assert look(passes, {"a": 1, "b": 2, "c": 1}, 340) == ["a", "b"]


@given(st.integers(1, 6),
       st.lists(st.tuples(st.floats(0.5, 1.5),
                          st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 2))),
                min_size=1, max_size=15))
def test_every_node_is_gone_over_within_n_intervals_and_at_each_change(every, periodics):
    """Periodics about an interval apart (up to half an interval early or late)."""
    passes = tracker_passes.TrackerPasses(every, INTERVAL)
    last_seen = {}  # node: when nova last looked at it
    previous, now = {}, 0.0
    for spacing, managed in periodics:
        now += spacing * INTERVAL
        passes.keep_only(managed)
        due = look(passes, managed, now)
        assert len(due) == len(set(due)) and set(due) <= set(managed)
        for node, value in managed.items():
            if node not in previous or previous[node] != value:
                assert node in due  # new here, or changed since nova's last look
            if node in due:
                last_seen[node] = now
            # never N - 1/2 intervals unseen after a periodic (N at periodics on time)
            assert now - last_seen[node] < passes.longest_s
        previous = managed
