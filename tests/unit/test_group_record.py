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

"""The group's record (``group_record``) in the coordination backend, through tooz's
own ``file://`` driver (no nova database: a compute service of any cell reaches it)."""

import pytest
from tooz import coordination

from rp_reporter import group_record
from rp_reporter import membership


@pytest.fixture
def backend(tmp_path):
    group = membership.Group(f"file://{tmp_path}", "nova-a", "compute-1").start()
    yield group
    group.stop()


def test_members_and_whom_a_mover_forced_down_are_kept_in_the_backend(backend):
    record = group_record.GroupRecord("nova-a", backend.durable)
    other = group_record.GroupRecord("nova-b", backend.durable)  # another group, one backend
    assert record.members() == set() and record.forced_down_by_mover("h2") is None
    for host in ("H1", "h2", "H1", "h20"):
        record.join(host)
    other.join("h9")
    assert record.members() == {"h1", "h2", "h20"} and other.members() == {"h9"}
    record.forced_down("h2", "H1")
    record.forced_down("h20", "h1")
    assert record.forced_down_by_mover("H2") == "h1"
    assert record.forced_down_by_mover("H1") is None
    assert other.forced_down_by_mover("h2") is None and other.movers() == {}
    record.cleared("h2")
    assert record.movers() == {"h20": "h1"}  # h2's alone
    record.cleared("h2")  # idempotent
    assert record.members() == {"h1", "h2", "h20"}  # a member still
    record.forget("h20")  # decommissioned: its mover's name goes with it
    assert record.members() == {"h1", "h2"} and record.movers() == {}


def test_a_hold_is_kept_with_its_bound_replaced_released_and_forgotten(backend):
    record = group_record.GroupRecord("nova-a", backend.durable)
    record.join("h1")
    record.hold("H1", 1000.7)
    assert record.holds() == {"h1": 1000}
    record.hold("h1", 2000)  # held again: one hold, the new bound
    assert record.holds() == {"h1": 2000}
    assert backend.durable.names("nova-a:rp_reporter.record.v1:held:") == {
        "nova-a:rp_reporter.record.v1:held:h1@2000"}
    record.release("h1")
    assert record.holds() == {} and record.members() == {"h1"}
    record.hold("h1", 3000)
    record.forget("h1")  # decommissioned: its hold goes with it
    assert record.holds() == {}


def test_each_kind_is_read_by_its_own_prefix_so_an_unknown_kind_is_ignored(backend):
    """One release of skew: names of a kind a release does not know (a later
    release's), or a hold whose bound is no number, change nothing it reads."""
    record = group_record.GroupRecord("nova-a", backend.durable)
    record.join("h1")
    for name in ("a-later-kind:h1@x", "held:h2@soon", "member-of:h3", "forced-down-by:h4"):
        backend.durable.add_name(f"nova-a:rp_reporter.record.v1:{name}")
    assert record.members() == {"h1"} and record.movers() == {} and record.holds() == {}


def test_the_record_outlives_every_lease_and_says_its_format(backend, tmp_path):
    """Names nobody joins: a member that left, or whose lease ran out, leaves them; a
    later reader (another process, the same backend) finds them, each carrying the
    format's version."""
    group_record.GroupRecord("nova-a", backend.durable).join("h1")
    group_record.GroupRecord("nova-a", backend.durable).forced_down("h2", "h1")
    backend.stop()
    later = membership.Group(f"file://{tmp_path}", "nova-a", "compute-2").start()
    try:
        record = group_record.GroupRecord("nova-a", later.durable)
        assert record.members() == {"h1"} and record.movers() == {"h2": "h1"}
        assert later.durable.names("nova-a:") == {
            "nova-a:rp_reporter.record.v1:member:h1",
            "nova-a:rp_reporter.record.v1:forced-down:h2@h1"}
    finally:
        later.stop()


def test_a_backend_not_answering_is_an_error_not_an_empty_record(tmp_path):
    """A read that fails raises: an empty answer would let a mover take every member
    for a stranger (and never fence) or a service keep a mover's flag."""
    group = membership.Group("redis://127.0.0.1:1?socket_timeout=0.2", "nova-a", "c1")
    record = group_record.GroupRecord("nova-a", group.durable)
    with pytest.raises(coordination.ToozError):
        record.members()


def test_a_live_member_writes_back_what_the_backend_lost(backend):
    """The backend's data gone (a restart without persistence, a flush): a live member
    writes back the members it saw live and the flags it set that nova still has (not
    one an operator lifted meanwhile)."""
    record = group_record.GroupRecord("nova-a", backend.durable)
    record.join("h1")
    record.forced_down("h3", "h1")
    for name in backend.durable.names("nova-a:"):
        backend.durable.remove_name(name)
    assert record.members() == set() and record.movers() == {}
    members, movers = record.write_back({"h1", "h2", "h3"}, {"h3": "h1", "h4": "h1"},
                                        {"h3": True, "h4": False})
    assert members == record.members() == {"h1", "h2", "h3"}
    assert movers == record.movers() == {"h3": "h1"}


def test_a_movers_name_goes_once_two_reads_in_a_row_find_its_flag_lifted(backend):
    record = group_record.GroupRecord("nova-a", backend.durable)
    record.forced_down("h2", "h1")
    record.forced_down("h3", "h1")
    lifted = record.drop_lifted({"h2": False, "h3": True}, {})
    assert lifted == {"h2": "h1"} and record.movers() == {"h2": "h1", "h3": "h1"}
    assert record.drop_lifted({"h2": False, "h3": True}, lifted) == {"h2": "h1"}
    assert record.movers() == {"h3": "h1"}


def test_builds_queued_to_a_service_that_left_are_kept_until_settled(backend):
    record = group_record.GroupRecord("nova-a", backend.durable)
    other = group_record.GroupRecord("nova-b", backend.durable)
    assert record.queued() == {}
    record.queue("H1", "node-1", {"s1", "s2"})
    record.queue("h1", "node-1", {"s2"})  # idempotent
    record.queue("h2", "node-2", {"s3"})
    other.queue("h1", "node-9", {"s9"})
    # a host's name that holds another kind's prefix is never read as one of these
    record.join("h1")
    assert record.queued() == {"h1": {"node-1": {"s1", "s2"}}, "h2": {"node-2": {"s3"}}}
    record.settled("h1", {"node-1": {"s1"}})
    record.settled("h1", {"node-1": {"s1"}})  # idempotent
    assert record.queued() == {"h1": {"node-1": {"s2"}}, "h2": {"node-2": {"s3"}}}
    assert other.queued() == {"h1": {"node-9": {"s9"}}}


def test_the_records_epoch_changes_only_when_the_backend_lost_its_data(backend):
    record = group_record.GroupRecord("nova-a", backend.durable)
    record.hold("h1", 2000)
    holds, epoch = record.holds_and_epoch()
    assert holds == {"h1": 2000} and record.holds_and_epoch() == (holds, epoch)
    for name in backend.durable.names("nova-a:"):  # a flush, a restart without persistence
        backend.durable.remove_name(name)
    holds, again = record.holds_and_epoch()
    assert holds == {} and again != epoch
    assert record.holds_and_epoch() == ({}, again)
