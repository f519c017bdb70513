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

"""The deletion guard (sync/absence.py): absence proven, never inferred."""

import json

import pytest

from rp_reporter import state as rp_state
from rp_reporter.sync import absence

HOUR = 3600.0


def judge(absent, present=100, seen=None, now=10 * HOUR, gap=None, allow_mass=False,
          share=0.02, elsewhere=0):
    return absence.judge(absent, present, seen or {}, now, HOUR, share, gap, allow_mass,
                         elsewhere)


def test_a_first_absence_is_remembered_not_acted_on():
    verdict = judge(["a"])
    assert verdict.delete == () and verdict.refused is None
    assert verdict.waiting == {"a": 10 * HOUR}


def test_an_absence_seen_an_interval_earlier_is_deleted():
    verdict = judge(["a"], seen={"a": 9 * HOUR})
    assert verdict.delete == ("a",)


def test_an_absence_seen_less_than_an_interval_earlier_waits():
    verdict = judge(["a"], seen={"a": 9.5 * HOUR})
    assert verdict.delete == () and verdict.waiting == {"a": 9.5 * HOUR}


def test_a_node_seen_again_is_forgotten():
    verdict = judge(["b"], seen={"a": 1.0, "b": 2.0})
    assert verdict.waiting == {"b": 2.0}


def test_an_unproven_listing_deletes_nothing_and_carries_nothing():
    verdict = judge(["a"], seen={"a": 1.0}, gap="scoped to project p")
    assert verdict.delete == () and verdict.waiting == {}
    assert verdict.reason == absence.UNPROVEN and "scoped to project p" in verdict.refused


def test_an_unproven_listing_is_refused_even_with_the_mass_flag():
    verdict = judge(["a"], seen={"a": 1.0}, gap="scoped", allow_mass=True)
    assert verdict.delete == () and verdict.reason == absence.UNPROVEN


def test_none_visible_is_refused_whatever_the_share():
    verdict = judge(["a", "b"], present=0, seen={"a": 1.0, "b": 1.0}, share=1.0)
    assert verdict.delete == () and verdict.reason == absence.NONE_VISIBLE
    assert "none of the 2 nodes" in verdict.refused
    assert "--allow-mass-deletion" in verdict.refused


def test_nodes_seen_outside_this_scope_show_ironic_is_not_blind():
    # This shard's last node is gone; Ironic still shows other shards' nodes.
    verdict = judge(["a"], present=0, seen={"a": 1.0}, elsewhere=40)
    assert verdict.delete == ("a",)


@pytest.mark.parametrize("vanished,refused", [(2, False), (3, True), (5, True)])
def test_more_than_the_share_at_once_is_refused(vanished, refused):
    absent = [f"n{i}" for i in range(vanished)]
    seen = dict.fromkeys(absent, 1.0)
    verdict = judge(absent, present=100 - vanished, seen=seen)
    assert (verdict.reason == absence.MASS) is refused
    assert len(verdict.delete) == (0 if refused else vanished)
    assert verdict.waiting == seen  # refused or not, the clock keeps running


def test_the_flag_lets_a_real_decommission_through_after_an_interval():
    absent = [f"n{i}" for i in range(5)]
    first = judge(absent, present=95, allow_mass=True)
    assert first.delete == () and first.refused is None
    second = judge(absent, present=95, seen=first.waiting, now=11 * HOUR, allow_mass=True)
    assert set(second.delete) == set(absent)


def test_one_deletion_is_always_allowed():
    assert absence.allowed(10, 0.02) == 1
    assert judge(["a"], present=9, seen={"a": 1.0}).delete == ("a",)


def test_state_file_round_trip_and_foreign_or_corrupt_files(tmp_path):
    path = tmp_path / "state.json"
    mine = rp_state.StateFile(str(path), {"ironic": "a"})
    assert mine.load("absent_since") is None
    mine.save("absent_since", {"x": 1.5})
    mine.save("other", 2)
    assert rp_state.StateFile(str(path), {"ironic": "a"}).load("absent_since") == {"x": 1.5}
    assert rp_state.StateFile(str(path), {"ironic": "b"}).load("absent_since") is None
    own = tmp_path / "state.absent_since.json"
    own.write_text("{not json")
    assert mine.load("absent_since") is None
    own.write_text(json.dumps({"format": 99}))
    assert mine.load("absent_since") is None
    assert mine.load("other") == 2  # each key its own file: one corrupt costs only itself
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # no temporary file left behind
        "state.absent_since.json", "state.other.json"]


def test_saving_a_key_never_reads_the_others_and_the_single_file_of_old_is_still_read(
        tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    mine = rp_state.StateFile(str(path), {"ironic": "a"})
    # Earlier releases kept every key in the base path.
    path.write_text(json.dumps({"format": rp_state.FORMAT, "identity": mine.identity,
                                "values": {"absent_since": {"x": 1.5}, "observations": [1]}}))
    assert mine.load("observations") == [1]
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: opened.append(str(p)) or
                        real_open(p, *a, **k))
    mine.save("observations", [2])
    assert opened == []  # the old documents are not parsed again to be kept
    monkeypatch.undo()
    assert mine.load("observations") == [2]  # its own file first
    assert mine.load("absent_since") == {"x": 1.5}  # not saved anew yet: the old file
