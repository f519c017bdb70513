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

"""The saved observation cache and its rolling re-verification (sync/observations.py)."""

import uuid

import pytest

from rp_reporter import model
from rp_reporter import state as rp_state
from rp_reporter.sync import observations
from rp_reporter.sync import provider
from rp_reporter.sync.plan import Observed

GOLD = {"CUSTOM_GOLD": model.inventory(0)}


def entries(count):
    return {u: Observed(u, 3, GOLD, frozenset({"CUSTOM_A", model.MANAGED_TRAIT}))
            for u in (str(uuid.uuid4()) for _ in range(count))}


def test_round_trip_keeps_every_entry_and_stores_shared_values_once():
    saved = entries(50)
    document = observations.dump(saved, pass_number=7)
    assert len(document["inventories"]) == 1 and len(document["traits"]) == 1
    loaded, pass_number = observations.load(document)
    assert loaded == saved and pass_number == 7


def test_aggregates_read_are_kept_and_entries_without_them_stay_unread():
    agg = frozenset({str(uuid.uuid4())})
    saved = {u: Observed(u, o.generation, o.inventories, o.traits, aggregates=agg)
             for u, o in entries(20).items()}
    saved.update(entries(5))  # aggregates never read (tenancy off then)
    document = observations.dump(saved, pass_number=2)
    assert len(document["aggregates"]) == 1
    loaded, _ = observations.load(document)
    assert loaded == saved
    assert sum(o.aggregates is None for o in loaded.values()) == 5


def test_a_document_from_before_tenancy_loads_with_nothing_known_of_aggregates():
    document = observations.dump(entries(3), pass_number=1)
    del document["aggregates"]
    loaded, _ = observations.load(document)
    assert all(o.aggregates is None for o in loaded.values())


@pytest.mark.parametrize("corrupt", [
    lambda d: d.update(aggregates=[["not-a-uuid"]]),
    lambda d: d["entries"].update({str(uuid.uuid4()): [1, 0, 0, 3]}),
    lambda d: d["entries"].update({str(uuid.uuid4()): [1, 0, 0, 0, 0]}),
    lambda d: d.update(format=2),
    lambda d: d.pop("entries"),
    lambda d: d.update(traits=[["not a trait"]]),
    lambda d: d["inventories"][0]["CUSTOM_GOLD"].pop("total"),
    lambda d: d["inventories"][0].update({"bad/name": {}}),
    lambda d: d["entries"].update({"not-a-uuid": [1, 0, 0]}),
    lambda d: d["entries"].update({str(uuid.uuid4()): [1, 5, 0]}),
    lambda d: d["entries"].update({str(uuid.uuid4()): [-1, 0, 0]}),
    lambda d: d.update(entries=[]),
    lambda d: d.update({"pass": "x"}),
])
def test_anything_malformed_is_refused_whole(corrupt):
    document = observations.dump(entries(3), pass_number=1)
    corrupt(document)
    with pytest.raises(ValueError):
        observations.load(document)


def test_every_entry_is_due_exactly_once_in_any_period_of_passes():
    period = 8
    uuids = list(entries(400))
    for start in (0, 5, 13):
        due_counts = {u: sum(observations.due(u, p, period) for p in range(start, start + period))
                      for u in uuids}
        assert set(due_counts.values()) == {1}
    share = sum(observations.due(u, 3, period) for u in uuids) / len(uuids)
    assert 0.05 < share < 0.2  # about 1/8 each pass


class ReadingPlacement:
    """Placement as the sync sees it; counts observe() calls."""

    def __init__(self, held):
        self.held, self.reads = held, 0

    def observe(self, uuid, aggregates=False):
        self.reads += 1
        return self.held[uuid]


PERIOD = 5


def restored(believed_traits, true_traits, placement_class=None):
    """(syncer, placement, desired): a cache entry believing one trait set while
    Placement holds another at the same generation (deleted and created again by
    someone else), the node wanting CUSTOM_A."""
    (u,) = entries(1)
    believed = Observed(u, 3, GOLD, frozenset(believed_traits) | {model.MANAGED_TRAIT})
    truth = Observed(u, 3, GOLD, frozenset(true_traits) | {model.MANAGED_TRAIT})
    placement = (placement_class or ReadingPlacement)({u: truth})
    syncer = provider.ProviderSync(placement, reverify_passes=PERIOD)
    syncer.restore(observations.dump({u: believed}, pass_number=0))
    return syncer, placement, model.Desired(u, u, "CUSTOM_GOLD", 0, frozenset({"CUSTOM_A"}))


def until_due(syncer, u):
    """Start passes until ``u`` is due (a syncer restored at pass 0)."""
    for _ in range(observations.bucket(u, PERIOD) or PERIOD):
        syncer.start_pass()


def test_a_wrong_entry_with_the_right_generation_is_read_again_within_the_period():
    syncer, placement, desired = restored({"CUSTOM_A"}, {"CUSTOM_B"})
    u = desired.uuid
    passes_trusted = 0
    for _ in range(PERIOD):
        syncer.start_pass()
        if not syncer.in_step(desired, (u, 3)):
            break
        passes_trusted += 1
    assert passes_trusted < PERIOD  # re-read within the period
    assert passes_trusted == (observations.bucket(u, PERIOD) or PERIOD) - 1
    result = syncer.sync(desired, 3, dry_run=True)
    assert placement.reads == 1 and result.ops  # the truth read, the repair planned


def test_a_malformed_saved_cache_is_ignored():
    syncer = provider.ProviderSync(ReadingPlacement({}))
    syncer.restore({"format": 1, "entries": "junk"})
    assert syncer.snapshot()["entries"] == {}


def test_a_due_entry_read_ahead_of_the_listing_is_trusted_in_its_pass():
    syncer, placement, desired = restored({"CUSTOM_A"}, {"CUSTOM_A"})
    u = desired.uuid
    until_due(syncer, u)
    assert syncer.due() == [u]
    syncer.reverify(u)
    # Read once, ahead; in step, so the pass has nothing left to do for it.
    assert placement.reads == 1
    assert syncer.in_step(desired, (u, 3)) and u not in syncer.reverifying
    syncer.start_pass()
    assert syncer.due() == []


def test_a_wrong_entry_read_ahead_is_repaired_in_its_pass():
    syncer, placement, desired = restored({"CUSTOM_A"}, {"CUSTOM_B"})
    until_due(syncer, desired.uuid)
    syncer.reverify(desired.uuid)
    assert not syncer.in_step(desired, (desired.uuid, 3))
    result = syncer.sync(desired, 3, dry_run=True)
    assert placement.reads == 1  # the read ahead is the one the sync plans on
    assert [op.kind for op in result.ops] == ["traits"]


def test_a_read_ahead_that_outlives_its_pass_is_dropped():
    class SlowPlacement(ReadingPlacement):
        def observe(self, uuid, aggregates=False):
            syncer.start_pass()  # the pass failed and the next one began meanwhile
            return super().observe(uuid, aggregates)

    syncer, placement, desired = restored({"CUSTOM_A"}, {"CUSTOM_B"}, SlowPlacement)
    until_due(syncer, desired.uuid)
    syncer.reverify(desired.uuid)
    assert placement.reads == 1
    # Its answer counts for no pass: the entry is as it was, due again in its turn.
    (row,) = syncer.snapshot()["entries"].values()
    assert syncer.snapshot()["traits"][row[2]] == sorted({"CUSTOM_A", model.MANAGED_TRAIT})


def test_a_cached_provider_the_listing_no_longer_shows_is_read_again():
    """Stock nova-compute replaces a provider's traits with the node's and its own, so
    the marker goes and the agents' listing of marked providers stops showing it (seen
    in tests/nova_cloud: the agent trusted its cache, in step, for as long as the
    rolling re-verification let it).  Unlisted means the cache is stale: the sync reads
    the provider and puts the marker back."""
    (u,) = entries(1)
    desired = model.Desired(u, u, "CUSTOM_GOLD", 0, frozenset({"CUSTOM_A"}))
    placement = ReadingPlacement({u: Observed(u, 4, GOLD, frozenset({"CUSTOM_A"}))})
    syncer = provider.ProviderSync(placement, reverify_passes=PERIOD)
    syncer.restore(observations.dump({u: Observed(u, 3, GOLD, frozenset(
        {"CUSTOM_A", model.MANAGED_TRAIT}))}, pass_number=0))
    syncer.start_pass()
    assert not syncer.in_step(desired, None)  # not listed
    result = syncer.sync(desired, provider.USE_CACHE, dry_run=True)
    assert placement.reads == 1
    assert [op.kind for op in result.ops] == ["traits"]
    assert model.MANAGED_TRAIT in result.ops[0].traits


def saved_file(tmp_path, saved, identity=None):
    state = rp_state.StateFile(str(tmp_path / "rp_reporter-a.json"), identity or {"ironic": "a"})
    state.save("observations", observations.dump(saved, pass_number=4))
    return state


def test_a_saved_file_read_as_a_stream_restores_every_entry_with_shared_values(tmp_path):
    """The entries are taken from the file as they are read (never the document whole),
    and each distinct inventory and trait set is one object in the cache."""
    saved = entries(200)
    with saved_file(tmp_path, saved).reading("observations", observations.PARTS,
                                            "entries") as document:
        assert not isinstance(document["entries"], dict)  # pairs, not an object
        syncer = provider.ProviderSync(ReadingPlacement({}))
        syncer.restore(document)
    snapshot = syncer.snapshot()
    assert observations.load(snapshot)[0] == saved and snapshot["pass"] == 4
    restored = list(syncer._cache.values())
    assert len({id(o.inventories) for o in restored}) == 1
    assert len({id(o.traits) for o in restored}) == 1
    assert isinstance(restored[0].inventories["CUSTOM_GOLD"]["allocation_ratio"], float)


@pytest.mark.parametrize("damage", [
    lambda text: text[: len(text) // 2],  # cut off in the entries
    lambda text: text.replace('"entries": {', '"entries": {"x": [1, 0, 0], '),
    lambda text: "not json",
])
def test_a_corrupt_saved_file_read_as_a_stream_is_ignored_whole(tmp_path, damage):
    state = saved_file(tmp_path, entries(200))
    path = tmp_path / "rp_reporter-a.observations.json"
    path.write_text(damage(path.read_text()))
    syncer = provider.ProviderSync(ReadingPlacement({}))
    with state.reading("observations", observations.PARTS, "entries") as document:
        if document is not None:
            syncer.restore(document)
    assert syncer.snapshot()["entries"] == {}


def test_a_saved_file_of_another_deployment_or_none_reads_as_none(tmp_path):
    saved_file(tmp_path, entries(3), identity={"ironic": "b"})
    for state in (rp_state.StateFile(str(tmp_path / "rp_reporter-a.json"), {"ironic": "a"}),
                  rp_state.StateFile(str(tmp_path / "rp_reporter-z.json"), {"ironic": "a"})):
        with state.reading("observations", observations.PARTS, "entries") as document:
            assert document is None
