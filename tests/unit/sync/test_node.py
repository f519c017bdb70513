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

"""The per-node sync (sync/node.py): desired(), the model with the reporter's options
(the agent's, the reconcile pass's and the CLI's), and derived traits: what is written to
Ironic, when nothing is, and what the provider then carries.  NodeTraits is faked here
(its own tests are tests/unit/sync/test_capability_traits.py); the agent's side of
derived traits is in tests/unit/agent/test_controller.py and test_rules.py."""

import dataclasses
import logging
import threading
import uuid

import pytest

from rp_reporter import errors
from rp_reporter import model
from rp_reporter.sync import node as node_sync

NODE = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "resource_class": "gold",
        "provision_state": "available", "power_state": "power off", "maintenance": False,
        "instance_uuid": str(uuid.uuid4()), "traits": ["CUSTOM_A", "CUSTOM_RPR_MANAGED"]}

UUIDS = [f"1be26c0b-03f2-4d2e-ae87-c02d7f33c12{i}" for i in range(4)]


@dataclasses.dataclass(frozen=True)
class Changes:
    add: frozenset = frozenset()
    remove: frozenset = frozenset()
    recorded: frozenset = frozenset()

    @property
    def changed(self):
        return bool(self.add or self.remove)


class FakeNodeTraits:
    """Derives CUSTOM_CAP_<X> from properties {"cap": X}; records what it applied."""

    def __init__(self, fail=(), kind=errors.UNAVAILABLE):
        self.applied, self.planned, self.fail, self.kind = [], 0, set(fail), kind
        self.attempts = []
        self.lock = threading.Lock()

    def problems(self, record):
        return ["odd"] * 3 if (record.get("properties") or {}).get("cap") == "ODD" else []

    def plan(self, record):
        with self.lock:
            self.planned += 1
        cap = (record.get("properties") or {}).get("cap")
        if cap == "boom":
            raise ValueError("odd properties")
        want = {f"CUSTOM_CAP_{cap}"} if cap else set()
        have = set(record.get("traits") or ())
        recorded = set((record.get("extra") or {}).get("derived", ()))
        return Changes(frozenset(want - have), frozenset((recorded - want) & have))

    def apply(self, record, dry_run=False):
        self.attempts.append(record["uuid"])
        if record["uuid"] in self.fail or "*" in self.fail:
            raise errors.ServiceError("ironic", self.kind, f"Ironic: {self.kind}")
        with self.lock:
            self.applied.append(record["uuid"])
        return self.plan(record)


def record(uuid, cap=None, traits=(), derived=()):
    return {"uuid": uuid, "resource_class": "gold", "provision_state": "available",
            "power_state": "power on", "maintenance": False, "instance_uuid": None,
            "traits": list(traits), "properties": {"cap": cap} if cap else {},
            "extra": {"derived": list(derived)}}


def desired_from(nodes, records, dry_run=False):
    """(desired providers of these records, {uuid: why} of failed derived-trait writes)."""
    return nodes.desired_from_records(iter(records), lambda uuid: True,
                                      lambda uuid, why: None, dry_run=dry_run)


def desired_by_uuid(nodes, records, dry_run=False):
    return {d.uuid: d for d in desired_from(nodes, records, dry_run)[0]}


def test_skip_reserve_in_use_reaches_the_model():
    node = model.node_from_api(NODE)
    assert node_sync.NodeSync(None, None).desired(node).reserved == 1
    assert node_sync.NodeSync(None, None, skip_reserve_in_use=True).desired(node).reserved == 0


def test_refused_node_traits_are_logged_once(caplog):
    nodes = node_sync.NodeSync(None, None)
    node = model.node_from_api(NODE)
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        for _ in range(3):
            desired = nodes.desired(node)
    assert desired.traits == {"CUSTOM_A"}
    assert [r.getMessage() for r in caplog.records if "CUSTOM_RPR_MANAGED" in r.getMessage()] \
        == [f"node {NODE['uuid']}: {desired.refusal}"]


def test_without_rules_nothing_is_planned_and_no_field_is_added():
    nodes = node_sync.NodeSync(None, None)
    assert nodes.extra_fields == ()
    desired = desired_by_uuid(nodes, [record(UUIDS[0], cap="UEFI")])
    assert desired[UUIDS[0]].traits == frozenset()


def test_only_nodes_out_of_step_are_written_and_their_provider_gets_the_traits(caplog):
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = fake = FakeNodeTraits()
    assert nodes.extra_fields == ("properties", "extra")
    records = [record(UUIDS[0], cap="UEFI"),  # new: written
               record(UUIDS[1], cap="UEFI", traits=["CUSTOM_CAP_UEFI"]),  # in step
               record(UUIDS[2]),  # nothing derived
               record(UUIDS[3], cap="BIOS", traits=["CUSTOM_CAP_UEFI", "CUSTOM_HAND"],
                      derived=["CUSTOM_CAP_UEFI"])]  # changed: one out, one in
    with caplog.at_level(logging.INFO, logger=node_sync.__name__):
        desired = desired_by_uuid(nodes, records)
    assert sorted(fake.applied) == [UUIDS[0], UUIDS[3]]
    assert desired[UUIDS[0]].traits == {"CUSTOM_CAP_UEFI"}
    assert desired[UUIDS[1]].traits == {"CUSTOM_CAP_UEFI"}
    assert desired[UUIDS[2]].traits == frozenset()
    assert desired[UUIDS[3]].traits == {"CUSTOM_CAP_BIOS", "CUSTOM_HAND"}
    lines = [r.getMessage() for r in caplog.records if "written to Ironic" in r.getMessage()]
    assert len(lines) == 2 and any(UUIDS[3] in line and "missing there: CUSTOM_CAP_BIOS" in line
                                   and "no longer: CUSTOM_CAP_UEFI" in line for line in lines)


def test_a_dry_run_writes_nothing_but_plans_the_provider():
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = fake = FakeNodeTraits()
    desired = desired_by_uuid(nodes, [record(UUIDS[0], cap="UEFI")], dry_run=True)
    assert fake.applied == [] and desired[UUIDS[0]].traits == {"CUSTOM_CAP_UEFI"}


def test_a_failed_write_costs_that_node_this_pass_and_is_retried(caplog):
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = FakeNodeTraits(fail={UUIDS[0]})
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        desired, failures = desired_from(nodes, [record(UUIDS[0], cap="UEFI"),
                                                 record(UUIDS[1], cap="UEFI")])
    by_uuid = {d.uuid: d for d in desired}
    assert by_uuid[UUIDS[0]].traits == frozenset()  # as Ironic holds it
    assert by_uuid[UUIDS[1]].traits == {"CUSTOM_CAP_UEFI"}
    assert set(failures) == {UUIDS[0]}
    assert [r.getMessage() for r in caplog.records if "derived-trait" in r.getMessage()][0] \
        == ("Ironic derived-trait writes unavailable, retrying until it returns: [ironic] "
            "Ironic: unavailable")


def test_odd_properties_cost_that_node_only_and_are_logged_once(caplog):
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = FakeNodeTraits()
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        for _ in range(3):
            desired = desired_by_uuid(nodes, [record(UUIDS[0], cap="boom"),
                                                   record(UUIDS[1], cap="UEFI")])
    assert desired[UUIDS[0]].traits == frozenset()
    assert desired[UUIDS[1]].traits == {"CUSTOM_CAP_UEFI"}
    assert len([r for r in caplog.records if "odd properties" in r.getMessage()]) == 1


def test_a_write_ironic_refuses_for_one_node_is_said_once_for_that_node(caplog):
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = FakeNodeTraits(fail={UUIDS[0]}, kind=errors.FAILED)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            desired = desired_by_uuid(nodes, [record(UUIDS[0], cap="UEFI"),
                                                   record(UUIDS[1], cap="UEFI")])
    assert desired[UUIDS[1]].traits == {"CUSTOM_CAP_UEFI"}
    assert [r.getMessage() for r in caplog.records] == [
        f"node {UUIDS[0]}: derived traits not written to Ironic: [ironic] Ironic: failed"]
    assert nodes.trait_writes.down_since is None


def test_a_node_the_queue_has_is_left_to_the_queues_fresher_read():
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = fake = FakeNodeTraits()
    nodes.busy = {UUIDS[0]}.__contains__
    desired = desired_by_uuid(nodes, [record(UUIDS[0], cap="UEFI"),
                                           record(UUIDS[1], cap="UEFI")])
    assert fake.applied == [UUIDS[1]]
    assert desired[UUIDS[0]].traits == frozenset()  # as listed; the queue syncs it anyway


def test_odd_capabilities_are_one_line_per_node(caplog):
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = FakeNodeTraits()
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        for _ in range(3):
            desired_by_uuid(nodes, [record(UUIDS[0], cap="ODD")])
    assert [r.getMessage() for r in caplog.records] == [
        f"node {UUIDS[0]}: derived traits: skipped odd; odd; odd"]


def test_a_pass_that_leaves_a_node_to_the_queue_keeps_its_refusal_logged_once(caplog):
    """Ironic refuses the node's derived trait (a 400) on every try.  A pass that finds
    the node in the queue's hands does not judge it, so it must not forget the refusal:
    the queue's own try right after would log it a second time (seen in the functional
    test at a 1 s interval)."""
    nodes = node_sync.NodeSync(None, None)
    nodes.node_traits = FakeNodeTraits(fail={UUIDS[0]}, kind=errors.FAILED)
    listed = record(UUIDS[0], cap="UEFI")
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        nodes.problems.start_pass()
        desired_from(nodes, [listed])  # refused, logged
        nodes.problems.end_pass()
        nodes.busy = {UUIDS[0]}.__contains__
        nodes.problems.start_pass()
        desired_from(nodes, [listed])  # the queue has it: not judged here
        nodes.problems.end_pass()
        node = node_sync.model.node_from_api(listed)
        with pytest.raises(errors.ServiceError):  # the queue's try: refused again
            nodes.with_derived_traits(listed, node)
    refusals = [r.getMessage() for r in caplog.records if "not written" in r.getMessage()]
    assert len(refusals) == 1, refusals
    assert nodes.node_traits.attempts == [UUIDS[0], UUIDS[0]]
