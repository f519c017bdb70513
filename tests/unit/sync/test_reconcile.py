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

"""A reconcile pass over in-memory stand-ins for the two clients (the pass's own
logic; the real services are the functional tests'): a pass on the lister's slice
decides what a pass on its own listings does, and only owned providers are re-read."""

import uuid as uuidlib

from rp_reporter import model
from rp_reporter import ring as rp_ring
from rp_reporter.sync import node as node_sync
from rp_reporter.sync import provider
from rp_reporter.sync import reconcile
from rp_reporter.sync import shared_listing
from tests.unit.sync.test_node import FakeNodeTraits

NODES = [str(uuidlib.UUID(int=i + 1)) for i in range(60)]
RING = rp_ring.Ring(["agent-0", "agent-1"])
MINE = {u for u in NODES if RING.owner(u) == "agent-1"}


def record(uuid, maintenance=False):
    return {"uuid": uuid, "name": None, "resource_class": "gold", "provision_state": "available",
            "power_state": "power off", "maintenance": maintenance, "instance_uuid": None,
            "traits": [], "conductor_group": "", "shard": None}


class Ironic:
    listing_gap = None

    def __init__(self, records):
        self.records = records
        self.listings = 0

    def iter_nodes(self, extra_fields=()):
        self.listings += 1
        yield from self.records

    def get_node(self, uuid, extra_fields=()):
        return next((r for r in self.records if r["uuid"] == uuid), None)


class Placement:
    """Holds every node's provider as the model wants it, at generation 1."""

    def __init__(self):
        self.observed = {u: provider.planner.apply(None, provider.planner.plan(
            model.desired(model.node_from_api(record(u))), None)) for u in NODES}
        self.observed = {u: o.__class__(u, 1, o.inventories, o.traits)
                         for u, o in self.observed.items()}
        self.reads, self.listings, self.requests = [], 0, {}

    def list_providers(self):
        self.listings += 1
        return {u: (u, o.generation) for u, o in self.observed.items()}

    def observe(self, uuid, aggregates=False):
        self.reads.append(uuid)
        return self.observed.get(uuid)


def reconciler(records, reverify_passes=64):
    placement = Placement()
    syncer = provider.ProviderSync(placement, reverify_passes=reverify_passes)
    nodes = node_sync.NodeSync(Ironic(records), syncer)
    return reconcile.Reconciler(nodes, owns=lambda u: u in MINE), placement


def slice_of(records, providers):
    return shared_listing.Listing([r for r in records if r["uuid"] in MINE],
                                  {u: p for u, p in providers.items() if u in MINE}, None)


def test_a_pass_on_the_listers_slice_finds_what_its_own_listing_finds():
    records = [record(u, maintenance=(i % 7 == 0)) for i, u in enumerate(NODES)]
    own, placement = reconciler(records)
    found_own = own.drift()
    shared, shared_placement = reconciler(records)
    found_shared = shared.drift(slice_of(records, shared_placement.list_providers()))
    assert sorted(found_shared.keys) == sorted(found_own.keys)
    assert found_own.keys and set(found_own.keys) <= MINE  # the maintenance nodes it owns
    assert found_shared.nodes == found_own.nodes == len(MINE)
    assert shared.ironic.listings == 0  # neither service listed for the shared pass
    assert shared_placement.listings == 1  # (the one list_providers above, the lister's)


def test_a_node_missing_from_the_slice_waits_for_two_listings_an_interval_apart():
    gone = sorted(MINE)[0]
    records = [record(u) for u in NODES if u != gone]  # deleted from Ironic
    shared, placement = reconciler(records)
    verdict = shared.drift(slice_of(records, placement.list_providers())).verdict
    assert gone in verdict.waiting and gone not in verdict.delete  # one listing proves nothing
    assert set(verdict.waiting) == {gone}


def test_the_lister_tees_every_record_and_then_the_providers():
    records = [record(u) for u in NODES]
    lister, placement = reconciler(records)

    class Tee:
        def __init__(self):
            self.seen, self.finished = [], None

        def add(self, r):
            self.seen.append(r["uuid"])

        def finish(self, providers, gap):
            self.finished = (set(providers), gap)

    tee = Tee()
    lister.drift(tee=tee)
    assert tee.seen == NODES  # owned or not: the other members' share goes out too
    assert tee.finished == (set(NODES), None)


def test_only_owned_providers_are_re_read_for_verification():
    """The cache keeps what it saw of nodes it no longer owns (a takeover then reads
    nothing); re-reading those would cost Placement a share of every provider per agent."""
    records = [record(u) for u in NODES]
    rec, placement = reconciler(records, reverify_passes=1)  # every entry due every pass
    rec.provider_sync.restore(rec.provider_sync.snapshot())
    for u in NODES:  # observed everything, as after a run alone
        rec.provider_sync._observe(model.Desired(u, u, None, 0, frozenset()), None)
    placement.reads.clear()
    rec.drift()
    assert placement.reads and set(placement.reads) <= MINE


def test_a_pass_hands_the_queue_what_its_listing_makes_of_each_node_out_of_step():
    """The queue syncs a node from this (no read per node) while nothing happens to it."""
    records = [record(u, maintenance=(i % 7 == 0)) for i, u in enumerate(NODES)]
    rec, _ = reconciler(records)
    found = rec.drift()
    assert found.keys and set(found.listed) == set(found.keys)
    listed = {r["uuid"]: r for r in records}
    for uuid, desired in found.listed.items():
        assert desired == rec.node_sync.desired(model.node_from_api(listed[uuid]))
    assert {d.reserved for d in found.listed.values()} == {0, 1}


def test_a_node_whose_derived_traits_are_in_question_is_not_handed_over():
    """With derived-trait rules, the pass's view of a node the queue has, or whose
    traits were to be written, is not what a sync's own read would give."""
    records = [dict(record(u, maintenance=True), properties={}, extra={}) for u in NODES]
    to_derive, queued = sorted(MINE)[:2]
    records[NODES.index(to_derive)]["properties"] = {"cap": "UEFI"}
    rec, _ = reconciler(records)
    rec.node_sync.node_traits = FakeNodeTraits()
    rec.node_sync.busy = lambda uuid: uuid == queued
    found = rec.drift()
    assert {to_derive, queued} <= set(found.keys)
    assert set(found.listed) == set(found.keys) - {to_derive, queued}
