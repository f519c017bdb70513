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

"""ProviderSync.create_many: what leaves the bulk path, and when it stops trying.

An in-memory Placement records the calls; the real-service behaviour (batches
taken, a batch refused for a foreign write) is in tests/functional.
"""

import concurrent.futures
import uuid

from rp_reporter import model
from rp_reporter.sync import provider
from rp_reporter.sync.placement import Conflict
from rp_reporter.sync.placement import Denied


class RecordingPlacement:
    def __init__(self, reshape_error=None, taken=()):
        self.calls = []
        self.reshape_error = reshape_error
        self.taken = set(taken)  # uuids that exist already (create answers 409)

    def create_provider(self, uuid, name):
        self.calls.append(("create", uuid))
        if uuid in self.taken:
            raise Conflict("POST", "/resource_providers", 409)
        return 0

    def set_traits(self, uuid, generation, traits):
        self.calls.append(("traits", uuid))
        return generation + 1

    def reshape_inventories(self, entries):
        self.calls.append(("reshape", tuple(sorted(entries))))
        if self.reshape_error:
            raise self.reshape_error


def new_nodes(count):
    return [model.Desired(u, u, "CUSTOM_GOLD", 0, frozenset())
            for u in sorted(str(uuid.uuid4()) for _ in range(count))]


def run(syncer, nodes, batch):
    one_by_one = []

    def fallback(d):
        one_by_one.append(d.uuid)
        return provider.Result(d.uuid, provider.Outcome.UPDATED)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(syncer.create_many(nodes, pool, batch, fallback))
    return results, one_by_one


def test_batches_of_the_given_size_and_each_node_once():
    nodes = new_nodes(7)
    syncer = provider.ProviderSync(RecordingPlacement())
    results, one_by_one = run(syncer, nodes, batch=3)
    reshapes = [c[1] for c in syncer.placement.calls if c[0] == "reshape"]
    # (recorded as the pool's two workers send them: in either order)
    assert sorted(len(r) for r in reshapes) == [1, 3, 3]
    assert sorted(u for r in reshapes for u in r) == [d.uuid for d in nodes]
    assert sorted(r.uuid for r in results) == [d.uuid for d in nodes]
    assert {r.outcome for r in results} == {provider.Outcome.CREATED} and one_by_one == []


def test_an_existing_provider_leaves_the_bulk_path():
    nodes = new_nodes(4)
    syncer = provider.ProviderSync(RecordingPlacement(taken=[nodes[1].uuid]))
    results, one_by_one = run(syncer, nodes, batch=10)
    assert one_by_one == [nodes[1].uuid]
    (reshape,) = [c[1] for c in syncer.placement.calls if c[0] == "reshape"]
    assert nodes[1].uuid not in reshape and len(reshape) == 3
    # Someone else's provider, adopted: updated, not created.
    assert {r.uuid for r in results if r.outcome is provider.Outcome.UPDATED} == {nodes[1].uuid}


def test_a_refused_batch_goes_node_by_node_and_bulk_stays_on():
    nodes = new_nodes(3)
    syncer = provider.ProviderSync(RecordingPlacement(
        reshape_error=Conflict("POST", "/reshaper", 409)))
    results, one_by_one = run(syncer, nodes, batch=10)
    assert sorted(one_by_one) == [d.uuid for d in nodes] and syncer.bulk
    assert {r.outcome for r in results} == {provider.Outcome.CREATED}


def test_forbidden_reshaper_turns_bulk_off_for_good_and_still_counts_creations():
    syncer = provider.ProviderSync(RecordingPlacement(
        reshape_error=Denied("POST", "/reshaper", 403)))
    results, _ = run(syncer, new_nodes(2), batch=10)
    assert not syncer.bulk
    # Created here, finished by the per-node sync (which saw a provider to update).
    assert [r.outcome for r in results] == [provider.Outcome.CREATED] * 2
    syncer.placement.calls.clear()
    _, one_by_one = run(syncer, new_nodes(2), batch=10)
    assert len(one_by_one) == 2 and syncer.placement.calls == []  # straight to per node


def test_nodes_without_a_class_are_not_created_in_bulk():
    (node,) = new_nodes(1)
    bare = model.Desired(node.uuid, node.uuid, None, 0, frozenset(), problem="no class")
    syncer = provider.ProviderSync(RecordingPlacement())
    _, one_by_one = run(syncer, [bare], batch=10)
    assert one_by_one == [node.uuid] and syncer.placement.calls == []


def test_any_error_while_creating_costs_that_node_only():
    nodes = new_nodes(3)
    placement = RecordingPlacement()
    real_set_traits = placement.set_traits

    def set_traits(uuid, generation, traits):
        if uuid == nodes[0].uuid:
            raise RuntimeError("connection reset")
        return real_set_traits(uuid, generation, traits)

    placement.set_traits = set_traits
    syncer = provider.ProviderSync(placement)
    results, one_by_one = run(syncer, nodes, batch=10)
    assert one_by_one == [nodes[0].uuid]
    # The first was created before its traits failed: it counts as created too.
    assert sorted(r.uuid for r in results if r.outcome is provider.Outcome.CREATED) == \
        sorted(d.uuid for d in nodes)



def test_a_batch_is_posted_while_the_one_before_is_in_flight():
    """POST /reshaper requests overlap: the next batch does not wait for the last."""
    import threading
    second_posted = threading.Event()
    nodes = new_nodes(6)

    class SlowReshaper(RecordingPlacement):
        def reshape_inventories(self, entries):
            super().reshape_inventories(entries)
            if nodes[0].uuid in entries:  # the first batch answers only once the second
                assert second_posted.wait(10), "the second batch waited for the first"
            else:
                second_posted.set()

    syncer = provider.ProviderSync(SlowReshaper())
    results, one_by_one = run(syncer, nodes, batch=3)
    assert one_by_one == []
    assert sorted(r.uuid for r in results) == [n.uuid for n in nodes]
    assert all(r.outcome is provider.Outcome.CREATED for r in results)


class HeldPlacement:
    """One provider as Placement holds it, read and written through the client's calls."""

    def __init__(self, observed):
        self.held, self.reads, self.writes = observed, [], []

    def observe(self, uuid, aggregates=False):
        self.reads.append(aggregates)
        held = self.held
        return held if aggregates else provider.dataclasses.replace(held, aggregates=None)

    def _write(self, kind, generation, **change):
        assert generation == self.held.generation, "a stale generation"
        self.writes.append((kind, *change.values()))
        self.held = provider.dataclasses.replace(self.held, generation=generation + 1, **change)
        return generation + 1

    def set_traits(self, uuid, generation, traits):
        return self._write("traits", generation, traits=frozenset(traits))

    def set_aggregates(self, uuid, generation, aggregates):
        return self._write("aggregates", generation, aggregates=frozenset(aggregates))


def test_tenancy_reads_the_aggregates_and_a_cache_without_them_proves_nothing():
    node = "00000000-0000-0000-0000-000000000005"  # never due for re-reading below
    traits = frozenset({model.MANAGED_TRAIT})
    held = provider.planner.Observed(node, 4, {"CUSTOM_GOLD": model.inventory(0)}, traits,
                                     aggregates=frozenset({"agg-p"}))
    placement = HeldPlacement(held)
    syncer = provider.ProviderSync(placement, reverify_passes=10**6, aggregates=True)
    syncer.reverify(node)  # the cache's entry, read as tenancy reads it
    assert placement.reads == [True]
    claimed_by_q = model.Desired(node, node, "CUSTOM_GOLD", 0, frozenset(),
                                 aggregates=frozenset({"agg-q"}),
                                 managed_aggregates=frozenset({"agg-p", "agg-q"}))
    assert not syncer.in_step(claimed_by_q, (node, 4))
    result = syncer.sync(claimed_by_q, listed_generation=4)
    assert placement.writes == [("aggregates", frozenset()), ("aggregates", {"agg-q"})]
    assert result.outcome is provider.Outcome.UPDATED
    assert syncer.in_step(claimed_by_q, (node, 6))
    # An entry saved before tenancy was on (no aggregates read) proves nothing.
    syncer.forget(node)
    syncer.restore(provider.observations.dump(
        {node: provider.dataclasses.replace(placement.held, aggregates=None)}, 1))
    assert not syncer.in_step(claimed_by_q, (node, 6))


class ClaimedPlacement(HeldPlacement):
    """HeldPlacement answering a stale generation with a 409, as Placement does, where
    nova's scheduler claims the provider between two syncs."""

    def _write(self, kind, generation, **change):
        if generation != self.held.generation:
            self.writes.append(("409", kind))
            raise Conflict("PUT", f"/resource_providers/{self.held.uuid}/{kind}", 409)
        return super()._write(kind, generation, **change)

    def set_inventories(self, uuid, generation, inventories):
        return self._write("inventories", generation, inventories=dict(inventories))

    def claim(self):
        """A server's allocation: Placement bumps the provider's generation."""
        self.held = provider.dataclasses.replace(self.held, generation=self.held.generation + 1)


def test_a_node_given_a_server_is_read_before_its_unit_is_reserved_and_meets_no_409():
    node = "00000000-0000-0000-0000-000000000006"
    held = provider.planner.Observed(node, 4, {"CUSTOM_GOLD": model.inventory(0)},
                                     frozenset({model.MANAGED_TRAIT}))
    placement = ClaimedPlacement(held)
    syncer = provider.ProviderSync(placement, reverify_passes=10**6)
    free = model.Desired(node, node, "CUSTOM_GOLD", 0, frozenset())
    assert syncer.sync(free, listed_generation=4).outcome is provider.Outcome.UNCHANGED
    reads = len(placement.reads)
    placement.claim()  # nova's scheduler claims the node, then tells Ironic the server
    taken = model.Desired(node, node, "CUSTOM_GOLD", 1, frozenset(), in_use=True)
    assert syncer.sync(taken, provider.USE_CACHE).outcome is provider.Outcome.UPDATED
    assert placement.writes == [("inventories", {"CUSTOM_GOLD": model.inventory(1)})]
    assert len(placement.reads) == reads + 1
    # Freed (a delete leaves the generation alone), then put into maintenance with no
    # server: the cache is trusted, no read.
    syncer.sync(free, provider.USE_CACHE)
    maintenance = model.Desired(node, node, "CUSTOM_GOLD", 1, frozenset())
    syncer.sync(maintenance, provider.USE_CACHE)
    assert len(placement.reads) == reads + 1
    assert [w[0] for w in placement.writes] == ["inventories"] * 3


def test_only_a_claim_unseen_by_the_cache_calls_for_a_read():
    held = provider.planner.Observed("n", 4, {"CUSTOM_GOLD": model.inventory(0)}, frozenset())
    in_use = model.Desired("n", "n", "CUSTOM_GOLD", 1, frozenset(), in_use=True)
    assert provider.planner.claimed_since(in_use, held)
    reserved = provider.dataclasses.replace(held, inventories={"CUSTOM_GOLD": model.inventory(1)})
    assert not provider.planner.claimed_since(in_use, reserved)  # written since the claim
    # [workarounds] skip_reserve_in_use_ironic_nodes: nothing to write, nothing to read
    kept = provider.dataclasses.replace(in_use, reserved=0)
    assert not provider.planner.claimed_since(kept, held)
    assert not provider.planner.claimed_since(provider.dataclasses.replace(in_use, in_use=False),
                                              held)
    assert model.desired(model.Node(uuid="n", resource_class="gold", instance_uuid="i")).in_use
