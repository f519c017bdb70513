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

"""One full reconcile: bulk observation of both sides, then the per-node sync
for every node in scope, then the providers whose nodes are proven gone.

Bulk observation is two listings (Ironic nodes with only the needed fields,
Placement providers carrying rp_reporter's marker); per-provider reads happen
only where the cached observation is stale, so a pass where nothing changed
costs those two listings and writes nothing.  Deletion is decided by
``absence.judge``: never on one listing, never on a listing that may be
partial, never for a mass disappearance unless the operator allows it.

Each record becomes a desired provider through the one per-node step
(``sync/node.py``), derived traits included.  Nodes with no provider yet (a
first start on a fleet) are created in bulk, their inventories a batch per
POST /reshaper (``create_in_bulk``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import logging
import sys
import time

from rp_reporter import errors
from rp_reporter import state as rp_state
from rp_reporter.sync import absence
from rp_reporter.sync import observations
from rp_reporter.sync import provider
from rp_reporter.sync.provider import NOT_LISTED
from rp_reporter.sync.provider import Outcome
from rp_reporter.sync.provider import Result

LOG = logging.getLogger(__name__)

# Re-reads of the rolling re-verification at once.  Few on purpose: they only need
# to end before Ironic's listing does, and more at once take CPU from Ironic
# serving that listing.
REVERIFY_READERS = 2
# Above this many unexplained providers, one unscoped uuid-only Ironic listing
# is cheaper than a direct read each.
DIRECT_CHECK_LIMIT = 20


@dataclasses.dataclass
class Summary:
    nodes: int = 0
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    skipped: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    failures: dict = dataclasses.field(default_factory=dict)  # uuid -> reason
    requests: dict = dataclasses.field(default_factory=dict)  # Placement, by method
    seconds: float = 0.0
    results: list = dataclasses.field(default_factory=list)
    node_views: list = dataclasses.field(default_factory=list)  # model.Node, owned nodes
    deletion_refused: str | None = None  # the deletion guard's one line, when it refused

    @property
    def converged(self):
        return not self.failures and not self.deletion_refused

    def add(self, result):
        self.results.append(result)
        self.outcomes[result.outcome] += 1
        if result.outcome is Outcome.SKIPPED:
            self.skipped[result.reason] += 1
        elif result.outcome is Outcome.FAILED:
            self.failures[result.uuid] = result.reason

    def as_dict(self):
        return {
            "nodes": self.nodes,
            **{o.value: self.outcomes[o] for o in Outcome},
            "skipped_reasons": dict(self.skipped),
            "failures": dict(self.failures),
            "placement_requests": dict(sorted(self.requests.items())),
            "seconds": round(self.seconds, 3),
            "deletion_refused": self.deletion_refused or "",
        }


@dataclasses.dataclass
class Drift:
    """What a resync found: work for the agent."""
    keys: list  # node uuids to sync one by one (changed nodes)
    new: list  # model.Desired with no provider yet: for the bulk path (bulk_batch > 0)
    nodes: int  # owned nodes observed
    skipped: int  # of those, nodes that cannot be offered
    verdict: absence.Verdict  # providers whose nodes are gone: delete, wait, or refuse
    changed: int = 0  # of keys, nodes out of step (the rest are due for re-verification)
    # Of keys, {uuid: model.Desired} that this pass's listing makes of each node, for a
    # sync with no read of its own while nothing happens to the node (Controller).
    listed: dict = dataclasses.field(default_factory=dict)


class Reconciler:
    """Runs one reconcile pass over the nodes this reporter owns."""

    def __init__(self, node_sync, workers=8, owns=None, bulk_batch=0, state=None,
                 absent_for=600.0, max_deletion_share=0.02):
        self.node_sync = node_sync  # node.NodeSync: the one per-node step
        self.ironic, self.provider_sync = node_sync.ironic, node_sync.provider_sync
        self.workers = workers
        self.bulk_batch = bulk_batch
        # Absences seen by earlier passes (a one-shot CLI run needs a state file).
        self.state = state or rp_state.InMemory()
        self.absent_for = absent_for
        self.max_deletion_share = max_deletion_share
        # Ring ownership plugs in here; alone, a reporter owns every node.
        self.owns = owns or (lambda uuid: True)
        # Managed providers whose nodes exist outside this reporter's scope
        # (another shard or conductor group): not ours to delete, not re-checked.
        self._foreign = set()
        # Nodes whose derived traits could not be written in the last pass (the agent
        # hands them to its work queue, which retries with backoff).
        self.trait_failures = {}

    def _sync_one(self, desired, listed_generation, dry_run):
        try:
            result = self.provider_sync.sync(desired, listed_generation, dry_run)
        except Exception as e:  # one node's failure costs that node only
            LOG.error("node %s: sync failed: %s", desired.uuid, e)
            return Result(desired.uuid, Outcome.FAILED, reason=str(e))
        return self._noted(result)

    def _noted(self, result):
        if result.reason and result.outcome is Outcome.SKIPPED:
            self.node_sync.note_skipped(result.uuid, result.reason)
        return result

    def _absent(self, listed, in_ironic):
        """Owned managed providers whose nodes this scope's listing lacks and that do
        not exist elsewhere in Ironic (another shard or conductor group: foreign)."""
        self._foreign -= in_ironic
        candidates = [u for u in listed
                      if u not in in_ironic and u not in self._foreign and self.owns(u)]
        if len(candidates) > DIRECT_CHECK_LIMIT:
            existing = self.ironic.list_all_uuids()
        else:
            existing = {u for u in candidates if self.ironic.get_node(u) is not None}
        self._foreign.update(u for u in candidates if u in existing)
        return [u for u in candidates if u not in existing]

    def _judge(self, absent, present, elsewhere, listing_gap, allow_mass, dry_run):
        seen = self.state.load("absent_since") or {}
        verdict = absence.judge(absent, present, seen, time.time(), self.absent_for,
                                self.max_deletion_share, listing_gap, allow_mass, elsewhere)
        # A dry run observes, and leaves no trace a later run acts on.
        if not dry_run and verdict.waiting != seen:
            self.state.save("absent_since", verdict.waiting)
        return verdict

    def note_foreign(self, uuid):
        """A managed provider whose node exists outside this scope: not ours to delete."""
        self._foreign.add(uuid)

    def _observe(self, summary, keep_views=True, allow_mass=False, dry_run=False,
                 listing=None, tee=None):
        """Both bulk listings -> (desired for owned nodes, listed providers, the verdict
        on providers whose nodes are absent).

        Ironic's records are turned into desired state page by page and dropped,
        never held whole (at a large fleet they would outweigh everything else).
        ``listing`` (a shared_listing.Listing): another member's listing of this
        reporter's slice, read instead of listing both services.  ``tee``: sees
        every record listed (``add``), then the providers and the listing gap
        (``finish``), to hand the other members their slices.
        """
        in_ironic = set()

        def noting_uuids(records):
            for record in records:
                if isinstance(record, dict):
                    in_ironic.add(sys.intern(str(record.get("uuid"))))  # as model's uuids
                    if tee is not None:
                        tee.add(record)
                yield record

        self.provider_sync.start_pass()
        self.node_sync.problems.start_pass()
        # Placement's listing and the re-reads of the re-verification due this pass
        # run beside Ironic's listing: the pass costs the longer of the two
        # listings, not their sum, and the re-verification no time of its own.
        pool = concurrent.futures.ThreadPoolExecutor(1 + REVERIFY_READERS)
        try:
            if listing is None:
                providers = pool.submit(self.provider_sync.placement.list_providers)
            # Only this reporter's own: the cache keeps what it observed of nodes it no
            # longer owns (a takeover then costs no reads), and re-reading those would
            # cost Placement a share of every provider once per agent, growing with
            # the agents as the fleet is shared out.
            for uuid in self.provider_sync.due():
                if self.owns(uuid):
                    pool.submit(self.provider_sync.reverify, uuid)
            records = (self.ironic.iter_nodes(self.node_sync.extra_fields) if listing is None
                       else listing.records)
            desired, self.trait_failures = self.node_sync.desired_from_records(
                noting_uuids(records), self.owns,
                lambda uuid, why: summary.add(Result(uuid, Outcome.SKIPPED, reason=why)),
                summary.node_views if keep_views else None, dry_run)
            summary.failures.update(self.trait_failures)
            listed = providers.result() if listing is None else listing.providers
            listing_gap = self.ironic.listing_gap if listing is None else listing.listing_gap
            if tee is not None:
                tee.finish(listed, listing_gap)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)  # the pass fails now, not later
            raise
        pool.shutdown()  # every due re-read done: the partition below uses them
        absent = self._absent(listed, in_ironic)
        present = sum(1 for u in listed if u in in_ironic and self.owns(u))
        elsewhere = sum(1 for u in listed if u in self._foreign and self.owns(u))
        verdict = self._judge(absent, present, elsewhere, listing_gap, allow_mass, dry_run)
        return desired, listed, verdict

    def drift(self, listing=None, tee=None):
        """The periodic resync of the agent: bulk observation, then only the owned nodes
        whose provider may differ from desired, and the verdict on absent nodes.

        The cache decides what is in step, so a fleet with nothing changed yields
        nothing to do and no per-provider reads.  A node that cannot be offered is
        logged once.  ``listing`` and ``tee``: the shared listing (``_observe``).
        """
        summary = Summary()
        desired, listed, verdict = self._observe(summary, keep_views=False, listing=listing,
                                                 tee=tee)
        _, new, rest = self._partition(desired, listed, dry_run=False)
        for d in desired:
            if d.problem:
                self.node_sync.note_skipped(d.uuid, d.problem)
        skipped = sum(1 for d in desired if d.problem) + summary.outcomes[Outcome.SKIPPED]
        keys = [d.uuid for d in rest]
        # A node whose derived traits could not be written: the queue retries it.
        retry = set(self.trait_failures) - set(keys)
        new = [d for d in new if d.uuid not in retry]
        keys += sorted(retry)
        changed = sum(1 for u in keys if u not in self.provider_sync.reverifying)
        self.node_sync.problems.end_pass()
        read_again = self.node_sync.read_again
        return Drift(keys=keys, new=new, nodes=len(desired),
                     skipped=skipped, verdict=verdict, changed=changed,
                     listed={d.uuid: d for d in rest if d.uuid not in read_again})

    def create_in_bulk(self, new, enqueue, should_stop):
        """Providers Placement does not have yet (a first start on a fleet), their
        inventories a batch per request; yields a Result for each one created.

        Whatever leaves the bulk path goes to ``enqueue(uuids)`` (the per-node sync),
        as does what is left when ``should_stop()`` says so (stopping, fenced) or a
        service fails, so nothing is lost; a ServiceError is raised after that.
        ``new`` is used up chunk by chunk, so its desired providers are freed as the
        cache fills instead of being held beside it to the end.
        """
        total, created = len(new), 0
        LOG.info("reconcile: %d nodes have no provider, creating in bulk", total)
        # A few batches per chunk, so their POST /reshaper requests overlap.
        chunk_size = self.bulk_batch * provider.RESHAPERS

        def one_by_one(desired):  # the bulk path's fallback: that node, queued
            enqueue([desired.uuid])

        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            while new:
                if should_stop():
                    enqueue(d.uuid for d in new)
                    break
                chunk = new[-chunk_size:]
                del new[-chunk_size:]
                # A node another sync has (its notification came first) is left to
                # it: both would write, and one would meet a conflict.
                chunk = [d for d in chunk if self.owns(d.uuid) and not self.node_sync.busy(d.uuid)]
                try:
                    results = list(self.provider_sync.create_many(chunk, pool, self.bulk_batch,
                                                           one_by_one))
                except (errors.ServiceError, errors.Fenced):
                    enqueue(d.uuid for d in chunk + new)
                    raise
                for result in filter(None, results):
                    created += 1
                    yield result
        LOG.info("reconcile: %d of %d providers created in bulk; the rest go through the "
                 "work queue", created, total)

    def restore_observations(self):
        """Start from the observations an earlier process saved (if any), their entries
        read from the file as they are taken."""
        with self.state.reading("observations", observations.PARTS, "entries") as document:
            if document is not None:
                self.provider_sync.restore(document)

    def save_observations(self):
        """Keep what this process observed for the next one (a state file only)."""
        if self.state.persistent:
            self.state.save("observations", self.provider_sync.snapshot())

    def delete(self, uuid, dry_run=False):
        """Delete one provider whose node is proven gone (unless allocations hold it)."""
        try:
            return self.provider_sync.delete_unallocated(uuid, dry_run)
        except Exception as e:
            LOG.error("node %s: delete failed: %s", uuid, e)
            return Result(uuid, Outcome.FAILED, reason=str(e))

    @staticmethod
    def kept_absent(verdict):
        """A Result for each absent node whose provider this pass keeps, saying why."""
        deleting = set(verdict.delete)
        for uuid, since in sorted(verdict.waiting.items()):
            if uuid not in deleting:
                yield Result(uuid, Outcome.KEPT, reason=verdict.refused or (
                    f"node absent from Ironic's listing since "
                    f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(since))}; deleted once "
                    f"a pass an interval later still lacks it"))

    def _partition(self, desired, listed, dry_run):
        """(in step as the cache proves, new providers for the bulk path, the rest).

        A quiet pass is almost all of the first kind, which needs no worker.
        """
        quiet, new, rest = [], [], []
        for d in desired:
            if self.provider_sync.in_step(d, listed.get(d.uuid)):
                quiet.append(d)
            elif d.uuid not in listed and self.bulk_batch and not dry_run:
                new.append(d)
            else:
                rest.append(d)
        return quiet, new, rest

    def run(self, dry_run=False, progress=None, allow_mass_deletion=False):
        """One pass; returns a Summary.  Listing failures raise (nothing was done)."""
        started = time.monotonic()
        requests_before = collections.Counter(self.provider_sync.placement.requests)
        summary = Summary()
        desired, listed, verdict = self._observe(summary, allow_mass=allow_mass_deletion,
                                                 dry_run=dry_run)
        summary.nodes = len(desired)
        summary.deletion_refused = verdict.refused  # the caller says it (CLI line, agent log)
        quiet, new, rest = self._partition(desired, listed, dry_run)
        done, total = 0, len(desired) + len(verdict.waiting)

        def record(result):
            nonlocal done
            done += 1
            if result is not None:
                summary.add(result)
            if progress:
                progress(done, total)

        for d in quiet:
            record(self._noted(provider.unchanged(d)))
        for result in self.kept_absent(verdict):
            record(result)
        with concurrent.futures.ThreadPoolExecutor(self.workers) as pool:
            futures = [pool.submit(self._sync_one, d, listed.get(d.uuid, (None, NOT_LISTED))[1],
                                   dry_run) for d in rest]
            futures += [pool.submit(self.delete, u, dry_run) for u in verdict.delete]
            # New providers: inventories in bulk; anything off that path is synced
            # on its own, reading Placement afresh.
            for result in self.provider_sync.create_many(new, pool, self.bulk_batch,
                                                  lambda d: self._sync_one(d, None, False)):
                record(result)
            for future in concurrent.futures.as_completed(futures):
                record(future.result())
        if not dry_run:
            self.save_observations()
        self.node_sync.problems.end_pass()
        summary.requests = dict(collections.Counter(self.provider_sync.placement.requests)
                                - requests_before)
        summary.seconds = time.monotonic() - started
        return summary

