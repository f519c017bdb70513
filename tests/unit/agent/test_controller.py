"""The agent's one sync function (Controller.sync_node) with derived traits: the
fast path writes Ironic, then gives the provider the traits; an outage is retried, and
a refusal is said once while Placement still follows.  NodeTraits is faked as in
tests/unit/sync/test_node.py."""

import logging

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter.sync import provider
from tests.unit.sync.test_node import UUIDS
from tests.unit.sync.test_node import FakeNodeTraits
from tests.unit.sync.test_node import desired_by_uuid
from tests.unit.sync.test_node import desired_from
from tests.unit.sync.test_node import record


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
