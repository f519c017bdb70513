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

"""The agent's one sync function (Controller.sync_node) with derived traits: the
fast path writes Ironic, then gives the provider the traits; an outage is retried, and
a refusal is said once while Placement still follows.  NodeTraits is faked as in
tests/unit/sync/test_node.py."""

import logging
import time

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter.agent import controller as rp_controller
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


# -- a resync's key, synced from its listing -----------------------------------
def listed(agent, uuid):
    """What a pass's listing makes of the node (as Reconciler.drift hands it over)."""
    return {uuid: desired_from(agent.node_sync, [record(uuid)])[0][0]}


def syncs(agent, read):
    return agent.metrics.registry.get_sample_value("rp_reporter_node_syncs_total",
                                                   {"read": read}) or 0


def test_a_resync_key_nothing_happened_to_is_synced_from_its_listing(agent):
    agent.node_sync.ironic = ironic = FakeIronic([record(UUIDS[0])])
    agent.controller.enqueue([UUIDS[0]], listed(agent, UUIDS[0]), time.monotonic())
    assert agent.controller.sync_node(UUIDS[0]) is True
    assert ironic.reads == []  # no read of its own: one request fewer per node
    assert agent.node_sync.provider_sync.synced == [listed(agent, UUIDS[0])[UUIDS[0]]]
    assert (syncs(agent, "listing"), syncs(agent, "ironic")) == (1, 0)
    # Used once: the key's next sync (a retry, say) reads the node.
    assert agent.controller.sync_node(UUIDS[0]) is True
    assert ironic.reads == [()] and syncs(agent, "ironic") == 1


@pytest.mark.parametrize("happened", ["notified", "taken over", "synced"])
def test_a_node_touched_since_its_listing_began_is_read_again(agent, happened):
    """A notification, a takeover or a sync since the listing began, before the
    hand-over: the listing may predate that change, so the sync reads the node."""
    agent.node_sync.ironic = ironic = FakeIronic([record(UUIDS[0])])
    listing_began = time.monotonic()
    if happened == "notified":
        agent.controller.on_notification(UUIDS[0], "baremetal.node.update.end", None)
    elif happened == "taken over":
        agent.controller.on_members_changed([UUIDS[0]])
    else:
        agent.controller.sync_node(UUIDS[0])
        ironic.reads.clear()
    agent.controller.enqueue([UUIDS[0]], listed(agent, UUIDS[0]), listing_began)
    agent.controller.sync_node(UUIDS[0])
    assert ironic.reads == [()] and syncs(agent, "listing") == 0


def test_a_notification_after_the_hand_over_makes_the_sync_read(agent):
    agent.node_sync.ironic = ironic = FakeIronic([record(UUIDS[0])])
    agent.controller.enqueue([UUIDS[0]], listed(agent, UUIDS[0]), time.monotonic())
    agent.controller.on_notification(UUIDS[0], "baremetal.node.update.end", None)
    agent.controller.sync_node(UUIDS[0])
    assert ironic.reads == [()]


def test_each_hand_over_replaces_the_last_and_an_old_listing_hands_over_nothing(agent):
    agent.node_sync.ironic = ironic = FakeIronic([record(u) for u in UUIDS[:2]])
    controller = agent.controller
    now = time.monotonic()
    controller.enqueue([UUIDS[0]], listed(agent, UUIDS[0]), now)
    controller.enqueue([UUIDS[1]], listed(agent, UUIDS[1]), now)
    controller.sync_node(UUIDS[0])  # still queued from the pass before: read
    assert ironic.reads == [()]
    controller.sync_node(UUIDS[1])
    assert ironic.reads == [()] and syncs(agent, "listing") == 1
    # What happened before the horizon is forgotten: a listing that old proves nothing.
    controller.enqueue([UUIDS[1]], listed(agent, UUIDS[1]),
                       now - rp_controller.TOUCHED_HORIZON - 1)
    controller.sync_node(UUIDS[1])
    assert ironic.reads == [(), ()]
