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

"""Make one provider match one desired state: observe, plan, write, and on a
generation conflict re-observe that one provider and re-plan.

This is the single per-node sync routine; the reconcile pass, the agent's
work queue and the CLI all go through ``ProviderSync.sync``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import enum
import logging
import random
import threading
import time

from rp_reporter.sync import observations
from rp_reporter.sync import plan as planner
from rp_reporter.sync.placement import Conflict
from rp_reporter.sync.placement import PlacementError

LOG = logging.getLogger(__name__)

RESHAPE_GENERATION_STEP = 2
# POST /reshaper requests in flight at once while new providers are created.
# Each is one transaction over a whole batch; one at a time left the creation
# workers waiting on each (doc/benchmarks/concurrency.md), and more than a few
# only queue in Placement behind the creations.
RESHAPERS = 3

NOT_LISTED = object()  # the bulk listing did not show this provider
USE_CACHE = object()  # no listing at hand: trust the cache (a stale one costs a 409)


class Outcome(enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    SKIPPED = "skipped"
    DELETED = "deleted"
    KEPT = "kept"  # gone from Ironic, but allocations hold the provider
    FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class Result:
    uuid: str
    outcome: Outcome
    ops: tuple = ()
    before: planner.Observed | None = None
    reason: str | None = None
    attempts: int = 1


def _outcome(ops, desired):
    if desired.problem:
        return Outcome.SKIPPED
    if not ops:
        return Outcome.UNCHANGED
    if isinstance(ops[0], planner.CreateProvider):
        return Outcome.CREATED
    return Outcome.UPDATED


def unchanged(desired):
    """The Result for a node whose provider, as the cache proves, already holds ``desired``."""
    return Result(desired.uuid, _outcome((), desired), reason=desired.problem)


class ProviderSync:
    """Per-node sync with an observation cache validated by provider generation.

    A cached observation is used only while the bulk listing shows the same
    generation (any inventory, trait or allocation write bumps it), and each
    is re-read at least once every ``reverify_passes`` passes, which bounds
    the life of the one kind of wrong entry a generation cannot show (see
    ``observations``).  Usages are never cached (deleting an allocation does
    not bump the generation).
    """

    def __init__(self, placement, conflict_retries=5, reverify_passes=64, owner_guard=None,
                 aggregates=False):
        self.placement = placement
        # Tenancy on: the providers' aggregates are read with the rest (re-verification too).
        self.aggregates = aggregates
        self.conflict_retries = conflict_retries
        self.reverify_passes = reverify_passes
        self.pass_number = 0  # which share of the cache this pass re-reads
        self.reverifying = set()  # this pass: in step as cached, re-read only because due
        self._reverified = set()  # this pass: due entries already re-read (reverify())
        self.bulk = True  # POST /reshaper allowed (until Placement says 403)
        # Called with the node uuid before each write of a sync: the agent's raises
        # errors.Fenced once the node is no longer its own (a ring change mid-sync).
        self.owner_guard = owner_guard or (lambda uuid: None)
        self._cache = {}
        self._interned = observations.Interned()
        self._lock = threading.Lock()

    def start_pass(self):
        """A new bulk pass: the next share of the cache is due for re-reading."""
        self.pass_number += 1
        self.reverifying = set()
        self._reverified = set()

    def due(self):
        """The cached providers this pass re-reads whatever the cache says."""
        with self._lock:
            return [u for u in self._cache
                    if observations.due(u, self.pass_number, self.reverify_passes)]

    def reverify(self, uuid):
        """Re-read one due entry now: the pass runs these beside its listings, so the
        rolling re-verification costs no time of its own.  The fresh read replaces
        the entry; ``in_step`` then trusts it like any other, against the listing's
        generation (a write in between shows there).  A failed read leaves the
        entry due: the sync reads it again."""
        pass_number = self.pass_number
        try:
            observed = self.placement.observe(uuid, aggregates=self.aggregates)
        except Exception as e:  # noqa: BLE001 - read again by the sync, where it counts
            LOG.debug("node %s: re-verification read failed: %s", uuid, e)
            return
        with self._lock:
            if pass_number != self.pass_number:
                return  # a read that outlived its (failed) pass
            if observed is None:
                self._cache.pop(uuid, None)
            else:
                self._cache[uuid] = self._interned.observed(observed)
            self._reverified.add(uuid)

    def snapshot(self):
        """The cache as a document that survives the process."""
        with self._lock:
            entries = dict(self._cache)
        return observations.dump(entries, self.pass_number)

    def restore(self, document):
        """Take a saved cache; a malformed one is ignored (every provider is read)."""
        try:
            # The document's few inventories and trait sets interned once each: its
            # entries then refer to the cache's objects and go in as they are.
            entries, self.pass_number = observations.load(document, share=self._interned)
        except ValueError as e:
            LOG.warning("saved observations ignored, reading providers afresh: %s", e)
            return
        with self._lock:
            for uuid, observed in entries.items():
                self._cache.setdefault(uuid, observed)
        if entries:
            LOG.info("%d saved observations restored", len(entries))

    def forget(self, uuid):
        with self._lock:
            self._cache.pop(uuid, None)

    def in_step(self, desired, listed):
        """True when the cache proves Placement already holds ``desired``.

        ``listed`` is the bulk listing's (name, generation), or None.  A cache
        entry that the listing contradicts is dropped, so the sync re-reads.
        """
        if listed is None:
            # Not in the listing of marked providers: whatever the cache says of it is
            # stale (another writer, stock nova-compute among them, removed the marker,
            # or it was deleted), so the sync that follows reads it afresh.
            self.forget(desired.uuid)
            return planner.plan(desired, None) == ()
        with self._lock:
            cached = self._cache.get(desired.uuid)
            if cached is None or cached.generation != listed[1]:
                self._cache.pop(desired.uuid, None)
                return False
        in_step = (not planner.needs_usages(desired, cached)
                   and not planner.lacks_aggregates(desired, cached)
                   and planner.plan(desired, cached) == ())
        if (observations.due(desired.uuid, self.pass_number, self.reverify_passes)
                and desired.uuid not in self._reverified):
            self.forget(desired.uuid)
            if in_step:  # not drift: read again only to bound a wrong entry's life
                self.reverifying.add(desired.uuid)
            return False
        return in_step

    def _observe(self, desired, listed_generation):
        uuid = desired.uuid
        if listed_generation is NOT_LISTED:
            return None  # create it; a 409 means it exists and we adopt it
        with self._lock:
            cached = self._cache.get(uuid)
        if (cached is not None and not planner.lacks_aggregates(desired, cached)
                and (listed_generation is USE_CACHE and not planner.claimed_since(desired, cached)
                     or cached.generation == listed_generation)):
            return cached
        observed = self.placement.observe(uuid, aggregates=desired.aggregates is not None)
        if observed is not None:
            observed = self._interned.observed(observed)
        with self._lock:
            if observed is None:
                self._cache.pop(uuid, None)
            else:
                self._cache[uuid] = observed
        return observed

    def _execute(self, uuid, generation, ops):
        for op in ops:
            self.owner_guard(uuid)
            if isinstance(op, planner.CreateProvider):
                generation = self.placement.create_provider(op.uuid, op.name)
            elif isinstance(op, planner.SetTraits):
                generation = self.placement.set_traits(uuid, generation, op.traits)
            elif isinstance(op, planner.SetAggregates):
                generation = self.placement.set_aggregates(uuid, generation, op.aggregates)
            elif isinstance(op, planner.SetInventories):
                generation = self.placement.set_inventories(uuid, generation, op.inventories)
        return generation

    def sync(self, desired, listed_generation=None, dry_run=False):
        """Make Placement hold ``desired``; returns a Result, raises on non-conflict errors.

        ``listed_generation``: the generation the bulk listing showed, NOT_LISTED
        when it did not show the provider, USE_CACHE to trust the cache, or
        None to read it afresh.
        """
        uuid = desired.uuid
        for attempt in range(1, self.conflict_retries + 2):
            observed = self._observe(desired, listed_generation)
            if planner.needs_usages(desired, observed):
                observed = observed.with_usages(self.placement.usages(uuid))
            ops = planner.plan(desired, observed)
            if dry_run or not ops:
                return Result(uuid, _outcome(ops, desired), ops, observed, desired.problem, attempt)
            try:
                generation = self._execute(uuid, observed.generation if observed else None,
                                           ops)
            except Conflict as e:
                # Someone else wrote (or the provider exists unlisted): forget what
                # we knew, re-read this one provider, plan again.
                self.forget(uuid)
                listed_generation = None
                LOG.info("node %s: %s; re-reading (attempt %d)", uuid, e, attempt)
                time.sleep(random.uniform(0, min(0.05 * 2 ** attempt, 1.0)))
                continue
            self._remember(observed, ops, generation)
            LOG.info("node %s: %s (%s)", uuid, _outcome(ops, desired).value,
                     ", ".join(op.kind for op in ops))
            return Result(uuid, _outcome(ops, desired), ops, observed, desired.problem, attempt)
        return Result(uuid, Outcome.FAILED, (), None,
                      f"generation conflicts {self.conflict_retries + 1} times in a row",
                      self.conflict_retries + 1)

    def _remember(self, observed, ops, generation):
        after = self._interned.observed(dataclasses.replace(
            planner.apply(observed, ops), generation=generation, usages=None))
        with self._lock:
            self._cache[after.uuid] = after

    def create_many(self, desired_list, pool, batch, one_by_one):
        """Providers the listing did not show, in fewer requests; yields Results.

        Each is created and given its traits as ``sync`` would (in ``pool``);
        their inventories then go ``batch`` at a time in one POST /reshaper each,
        which Placement takes all or nothing.  Whatever leaves this path (a
        provider that exists after all, an error, a refused batch) goes to
        ``one_by_one(desired)``, the per-node sync, so the end state is the same.
        """
        def prepare(desired):
            """(desired, ops, generation once created with traits, or None; created?)"""
            ops = planner.plan(desired, None)
            if not (self.bulk and ops and isinstance(ops[0], planner.CreateProvider)
                    and isinstance(ops[-1], planner.SetInventories)):
                return desired, ops, None, False
            created = False
            try:
                generation = self._execute(desired.uuid, None, ops[:1])
                created = True
                return desired, ops, self._execute(desired.uuid, generation, ops[1:-1]), True
            except Exception as e:  # noqa: BLE001 - that node goes the per-node way,
                # where a failure costs that node only
                LOG.info("node %s: bulk create: %s; one by one", desired.uuid, e)
                return desired, ops, None, created

        def finish_created(desired):
            """The per-node way for a provider this path created: it counts as created."""
            result = one_by_one(desired)
            if result is not None and result.outcome in (Outcome.UPDATED, Outcome.UNCHANGED):
                result = dataclasses.replace(result, outcome=Outcome.CREATED)
            return result

        def in_bulk(pending):
            return list(self._set_inventories_in_bulk(pending, finish_created))

        # Batches are posted while the next ones are created: inline, each POST
        # /reshaper left the creation workers idle for its whole round trip.
        with concurrent.futures.ThreadPoolExecutor(RESHAPERS) as reshapers:
            posted, pending = collections.deque(), []
            for desired, ops, generation, created in pool.map(prepare, desired_list):
                if generation is None:
                    yield (finish_created if created else one_by_one)(desired)
                    continue
                pending.append((desired, ops, generation))
                if len(pending) == batch:
                    posted.append(reshapers.submit(in_bulk, pending))
                    pending = []
                while posted and posted[0].done():
                    yield from posted.popleft().result()
            if pending:
                posted.append(reshapers.submit(in_bulk, pending))
            while posted:
                yield from posted.popleft().result()

    def _set_inventories_in_bulk(self, pending, one_by_one):
        try:
            self.placement.reshape_inventories(
                {d.uuid: (generation, ops[-1].inventories) for d, ops, generation in pending})
        except PlacementError as e:
            if e.status == 403:
                self.bulk = False  # this user may not reshape: per node from now on
                LOG.warning("POST /reshaper refused: the reporter's Placement user lacks the "
                            "service role; inventories go one request each (%s)", e)
            else:
                LOG.info("inventories of %d new providers refused in bulk (%s); one by one",
                         len(pending), e)
            for desired, _, _ in pending:
                yield one_by_one(desired)
            return
        for desired, ops, generation in pending:
            # A reshape sets each inventory twice (an interim union, then the final
            # one), so the generation moves by two.  Were that to change, the next
            # listing would disagree and the entry be dropped: a re-read, never a
            # wrong write.
            self._remember(None, ops, generation + RESHAPE_GENERATION_STEP)
            LOG.info("node %s: created (%s, inventories in bulk)", desired.uuid,
                     ", ".join(op.kind for op in ops[:-1]))
            yield Result(desired.uuid, Outcome.CREATED, ops, None, desired.problem)

    def delete_unallocated(self, uuid, dry_run=False):
        """Delete a provider whose node is proven gone (``sync/absence.py`` decides
        that), unless Placement holds allocations against it."""
        if self.placement.has_allocations(uuid):
            return Result(uuid, Outcome.KEPT, reason="node is gone from Ironic but the "
                                                     "provider still has allocations")
        if dry_run:
            return Result(uuid, Outcome.DELETED, reason="node is gone from Ironic")
        try:
            if not self.placement.delete_provider(uuid):
                self.forget(uuid)
                return Result(uuid, Outcome.UNCHANGED, reason="node and provider both gone")
        except Conflict as e:
            return Result(uuid, Outcome.KEPT, reason=f"delete refused: {e}")
        self.forget(uuid)
        LOG.info("node %s: gone from Ironic (absent from complete listings an interval "
                 "apart); provider deleted", uuid)
        return Result(uuid, Outcome.DELETED, reason="node is gone from Ironic")
