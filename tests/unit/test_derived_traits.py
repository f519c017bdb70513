"""Derived traits in the per-node sync (sync/node.py) and the agent ([traits] rules_file):
what is written to Ironic, when nothing is, and what the provider then carries.
NodeTraits is faked here (its own tests are tests/unit/test_capability_traits.py)."""

import dataclasses
import logging
import threading

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter.sync import node as node_sync
from rp_reporter.sync import provider

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


class FakeIronic:
    def __init__(self, records):
        self.records = {r["uuid"]: r for r in records}
        self.reads = []

    def get_node(self, uuid, extra_fields=()):
        self.reads.append(tuple(extra_fields))
        return dict(self.records[uuid])

    def in_scope(self, record):
        return True


class FakeSyncer:
    def __init__(self):
        self.synced = []

    def sync(self, desired, listed_generation=None, dry_run=False):
        self.synced.append(desired)
        return provider.Result(desired.uuid, provider.Outcome.UPDATED)


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n")
    agent = rp_agent.Agent(rp_conf.load(["--config-file", str(path)]))
    agent.node_sync.provider_sync = FakeSyncer()
    return agent


def test_the_fast_path_writes_ironic_then_gives_the_provider_the_traits(agent):
    agent.node_sync.ironic = FakeIronic([record(UUIDS[0], cap="UEFI", traits=["CUSTOM_HAND"])])
    agent.node_sync.node_traits = fake = FakeNodeTraits()
    assert agent.controller.sync_node(UUIDS[0]) is True
    assert agent.node_sync.ironic.reads == [("properties", "extra")]
    assert fake.applied == [UUIDS[0]]
    assert agent.node_sync.provider_sync.synced[0].traits == {"CUSTOM_CAP_UEFI", "CUSTOM_HAND"}


def test_the_fast_path_without_rules_reads_only_the_models_fields(agent):
    agent.node_sync.ironic = FakeIronic([record(UUIDS[0], cap="UEFI")])
    assert agent.controller.sync_node(UUIDS[0]) is True
    assert agent.node_sync.ironic.reads == [()]
    assert agent.node_sync.provider_sync.synced[0].traits == frozenset()


def test_the_fast_path_retries_when_ironic_is_down_for_the_write(agent):
    agent.node_sync.ironic = FakeIronic([record(UUIDS[0], cap="UEFI", traits=["CUSTOM_HAND"])])
    agent.node_sync.node_traits = FakeNodeTraits(fail={UUIDS[0]})
    # An outage: the queue retries with backoff.
    assert agent.controller.sync_node(UUIDS[0]) is False
    # Placement still gets the node as Ironic holds it, never a trait Ironic lacks.
    assert [d.traits for d in agent.node_sync.provider_sync.synced] == [{"CUSTOM_HAND"}]


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


def test_a_refused_trait_write_is_said_once_and_placement_still_follows(agent, caplog):
    agent.health.ready.set()
    agent.node_sync.ironic = FakeIronic([record(u, cap="UEFI") for u in UUIDS])
    agent.node_sync.node_traits = FakeNodeTraits(fail={"*"}, kind=errors.DENIED)
    with caplog.at_level(logging.ERROR):
        assert all(agent.controller.sync_node(u) is True for u in UUIDS)  # no retry fixes a refusal
    assert len(agent.node_sync.provider_sync.synced) == len(UUIDS)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "system-scoped member" in lines[0], lines
    ok, reason = agent.healthy()
    assert not ok and reason.startswith("Ironic derived-trait writes: ")
    # A pass while refused tries one node, not all of them.
    nodes = agent.node_sync
    nodes.node_traits.attempts.clear()
    _, failures = desired_from(nodes, [record(u, cap="UEFI") for u in UUIDS])
    assert len(nodes.node_traits.attempts) == 1 and failures == {}
    # Granted: the next write succeeds, the line says so, every node is written again.
    nodes.node_traits.fail.clear()
    desired_by_uuid(nodes, [record(u, cap="UEFI") for u in UUIDS])
    desired = desired_by_uuid(nodes, [record(u, cap="UEFI") for u in UUIDS])
    assert agent.healthy() == (True, "ok")
    assert all(d.traits == {"CUSTOM_CAP_UEFI"} for d in desired.values())


def test_a_bad_rule_file_on_reload_keeps_the_rules_in_force(agent, tmp_path, caplog,
                                                           monkeypatch):
    from rp_reporter import traits
    good = tmp_path / "rules.yaml"
    agent.node_sync.node_traits = kept = FakeNodeTraits()
    agent.conf.set_override("rules_file", str(good), group="traits")

    def refuse(path):
        raise traits.RulesError(str(path), "line 1", "not a mapping")
    monkeypatch.setattr(traits, "load_rules", refuse)
    with caplog.at_level(logging.ERROR, logger="rp_reporter.agent"):
        assert agent.reload_rules() is False
    assert agent.node_sync.node_traits is kept
    assert [r.getMessage() for r in caplog.records] == [
        f"trait rules not reloaded, the rules in force are kept: [traits] rules_file: "
        f"{good}: line 1: not a mapping"]


def test_rules_reload_and_bad_rules_at_start(agent, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("capabilities: [boot_mode]\n")
    agent.conf.set_override("rules_file", str(path), group="traits")
    assert agent.reload_rules() is True
    assert agent.node_sync.node_traits.rules.capabilities[0].key == "boot_mode"
    assert agent.resync_now.is_set()  # a resync puts every node in step with the new rules
    path.write_text("capabilities: {boot_mode: {colour: red}}\n")
    with pytest.raises(ValueError) as e:
        rp_agent.load_rules(agent.conf)
    assert str(e.value).startswith(f"[traits] rules_file: {path}: capabilities.boot_mode: ")
    assert "\n" not in str(e.value)
    agent.conf.clear_override("rules_file", group="traits")
    assert rp_agent.load_rules(agent.conf) is None


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
