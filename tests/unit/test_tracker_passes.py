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


def test_one_is_novas_behaviour_every_node_every_periodic():
    passes = tracker_passes.TrackerPasses(1)
    managed = {"a": 1, "b": 1}
    for _ in range(3):
        assert passes.nodes(managed) == (["a", "b"], True)
    assert not passes.enabled


def test_between_full_passes_only_new_and_changed_nodes_are_due():
    passes = tracker_passes.TrackerPasses(3)
    assert passes.nodes({"a": 1, "b": 1}) == (["a", "b"], True)  # the start: every node
    assert passes.nodes({"a": 1, "b": 1}) == ([], False)  # nothing happened to either
    assert passes.until_full() == 1
    # b changed in Ironic, c is new here (a takeover, a ring change, a new node).
    assert passes.nodes({"a": 1, "b": 2, "c": 1}) == (["b", "c"], False)
    assert passes.until_full() == 0
    assert passes.nodes({"a": 1, "b": 2, "c": 1}) == (["a", "b", "c"], True)
    assert passes.nodes({"a": 1, "b": 2, "c": 1}) == ([], False)


def test_a_node_that_leaves_and_comes_back_is_due_again():
    passes = tracker_passes.TrackerPasses(10)
    passes.nodes({"a": 1, "b": 1})
    # Gone from one periodic to the next (another service's for a while): due on return.
    assert passes.nodes({"a": 1}) == ([], False)
    assert passes.nodes({"a": 1, "b": 1}) == (["b"], False)
    # Released and taken back between two periodics (the renewals saw a ring change):
    # another service's resource tracker may have its record meanwhile.
    passes.forget({"b"})
    assert passes.nodes({"a": 1, "b": 1}) == (["b"], False)


@given(st.integers(1, 6),
       st.lists(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 2)), min_size=1,
                max_size=15))
def test_every_node_is_gone_over_at_least_once_in_n_periodics_and_at_each_change(
        every, periodics):
    passes = tracker_passes.TrackerPasses(every)
    last_seen = {}  # node: (periodic index, fingerprint) when it was last given to nova
    previous = {}
    for i, managed in enumerate(periodics):
        due, _ = passes.nodes(managed)
        assert len(due) == len(set(due)) and set(due) <= set(managed)
        for node, value in managed.items():
            if node not in previous or previous[node] != value:
                assert node in due  # new here, or changed since nova's last look
            if node in due:
                last_seen[node] = i
            assert i - last_seen[node] < every  # never longer than N periodics unseen
        previous = managed
