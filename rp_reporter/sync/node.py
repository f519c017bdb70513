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

"""The one per-node sync: an Ironic node record, its derived traits written to
Ironic, the desired provider, and Placement made to match it.

Every path that syncs a node goes through ``NodeSync``:

* the fast path and the agent's work queue: ``sync(uuid)`` reads the node
  from Ironic and syncs it, or ``sync_listed(desired)`` syncs what a reconcile
  pass made of its listing of a node nothing has happened to since;
* the reconcile pass (and its bulk creation): ``desired_from_records`` turns
  the listing's records into desired providers, which ``ProviderSync`` writes.

With ``node_traits`` set (``[traits] rules_file``), a node whose derived
traits (from its capabilities and other properties) differ from what Ironic
holds has them written to Ironic first, so its provider gets them in the same
sync.  Deciding that is pure: a node already in step costs no Ironic request.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import time

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import problems as rp_problems
from rp_reporter import tenancy as tenancy_names
from rp_reporter.outage import Outage
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import provider

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class NodeResult:
    """What ``sync(uuid)`` did: ``result`` when the provider was synced, else why not."""
    uuid: str
    result: provider.Result | None = None
    not_synced: str | None = None  # "not found", "foreign", "invalid"
    trait_error: errors.ServiceError | None = None  # derived traits Ironic did not take
    read_seconds: float = 0.0  # the node's read from Ironic (the rest of a sync is Placement's)


class NodeSync:
    def __init__(self, ironic, provider_sync, workers=8, skip_reserve_in_use=False,
                 busy=None):
        self.ironic = ironic
        self.provider_sync = provider_sync
        self.workers = workers
        # nova's [workarounds] skip_reserve_in_use_ironic_nodes, for the model.
        self.skip_reserve_in_use = skip_reserve_in_use
        self.problems = rp_problems.ProblemLog(LOG)  # each node's problems, logged once
        # capability_traits.NodeTraits when [traits] rules_file is set (the agent sets
        # it, and swaps it on a reload); None: no derived traits, no extra fields read.
        self.node_traits = None
        # uuid -> whether another sync has the node in hand (the agent's work queue):
        # that sync writes its derived traits from a fresher read than a pass's listing.
        self.busy = busy or (lambda uuid: False)
        # Writing derived traits to Ironic: one line when it fails and one when it is
        # back, however many nodes fail between (a reader-only [ironic] user, say).
        self.trait_writes = Outage("Ironic derived-trait writes")
        # sync.tenant_aggregates.NodeTenancy with [tenancy] enabled (the node_traits
        # then carry its public trait too); None: aggregates left alone.
        self.tenancy = None
        # The owned nodes of the last desired_from_records whose desired provider is
        # not what sync(uuid) would make of the same record (the queue had them, or
        # their derived traits were to be written): only a read of their own syncs them.
        self.read_again = set()

    @property
    def extra_fields(self):
        """The node fields to list and read beyond the model's: none without rules
        or tenancy."""
        fields = ironic_sync.TRAIT_FIELDS if self.node_traits is not None else ()
        return fields + (tenancy_names.FIELDS if self.tenancy is not None else ())

    # -- node -> desired ---------------------------------------------------
    def desired(self, node):
        """model.desired() with this reporter's options and tenancy's aggregates;
        refused node traits logged once.  Raises errors.ServiceError when nova
        cannot make a tenant aggregate the node needs (``prepare`` first avoids it)."""
        desired = model.desired(node, skip_reserve_in_use=self.skip_reserve_in_use)
        if desired.refusal:
            self.problems.note(desired.uuid, desired.refusal)
        if self.tenancy is not None:
            desired = self.tenancy.desired(desired, node)
        return desired

    def _tenancy_refused(self, node, failures, dry_run=False):
        """Tenancy's aggregates for this node made (True: not, the reason in
        ``failures``, and nothing of the node is written this pass).  ``dry_run``:
        none is made, a missing one is the reason."""
        if self.tenancy is None:
            return False
        try:
            self.tenancy.prepare(node, dry_run)
        except errors.ServiceError as e:
            self.problems.note(node.uuid, f"not synced: its tenant aggregates: {e}",
                               kind="tenant aggregates not made")
            failures[node.uuid] = f"tenant aggregates not made: {e}"
            return True
        return False

    def note_skipped(self, uuid, reason):
        self.problems.note(uuid, f"skipped: {reason}")

    def plan_traits(self, record):
        """The derived-trait changes Ironic needs for this node record (pure), or None
        when there are none or the record cannot be read (logged once)."""
        node_traits = self.node_traits
        if node_traits is None:
            return None
        try:
            changes = node_traits.plan(record)
            problems = node_traits.problems(record)
        except Exception as e:  # odd properties cost that node's derived traits only
            self.problems.note(record.get("uuid"), f"derived traits not computed: {e}",
                               kind="derived traits not computed")
            return None
        if problems:  # one line per node and distinct problems, however many passes
            more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
            self.problems.note(record.get("uuid"), "derived traits: skipped "
                               + "; ".join(problems[:3]) + more)
        return changes if changes.changed else None

    def with_derived_traits(self, record, node, dry_run=False):
        """``node`` as Ironic holds it once its derived traits are in step: they are
        written to Ironic here (``NodeTraits.apply``) unless ``dry_run``.  Ironic's
        errors propagate (the caller retries); a node already in step costs nothing."""
        changes = self.plan_traits(record)
        if changes is None:
            return node
        if not dry_run:
            try:
                changes = self.node_traits.apply(record)
            except errors.ServiceError as e:
                if e.kind == errors.DENIED:
                    e = errors.ServiceError(
                        "ironic", e.kind, f"{e}; writing derived traits ([traits] "
                        f"rules_file) needs a system-scoped member role for the [ironic] "
                        f"user, as resource-class set does")
                if e.kind in (errors.UNAVAILABLE, errors.DENIED, errors.MISCONFIGURED):
                    self.trait_writes.failed(e)  # the service's, not this node's
                else:  # this node's write refused (a trait too many, say)
                    self.problems.note(node.uuid, f"derived traits not written to Ironic: {e}",
                                       kind="derived traits not written")
                raise e from None
            self.trait_writes.ok()
            if changes.add or changes.remove:
                LOG.info("node %s: traits derived from its properties written to Ironic "
                         "(missing there: %s; derived earlier, no longer: %s)",
                         node.uuid, _names(changes.add), _names(changes.remove))
        return dataclasses.replace(node, traits=(node.traits - changes.remove) | changes.add)

    def _write_traits(self, record, node, failures):
        """with_derived_traits() in a pool: a failure costs that node's derived traits
        this pass (the node is synced as Ironic holds it), never the pass."""
        try:
            return self.with_derived_traits(record, node)
        except errors.ServiceError as e:  # logged once by trait_writes or problems
            if e.retryable:  # an outage: the agent's queue retries it with backoff
                failures[node.uuid] = f"derived traits not written to Ironic: {e}"
            return node
        except Exception as e:  # noqa: BLE001 - one node's failure costs that node
            LOG.warning("node %s: derived traits not written to Ironic: %s; retried",
                        node.uuid, e)
            failures[node.uuid] = f"derived traits not written to Ironic: {e}"
            return node

    def _writes_refused(self):
        """Ironic refuses derived-trait writes (permission or configuration): a pass
        then tries one node, not every node, until a write succeeds again."""
        error = self.trait_writes.error
        return error is not None and getattr(error, "kind", None) in (errors.DENIED,
                                                                       errors.MISCONFIGURED)

    def desired_from_records(self, records, owns, on_invalid, views=None, dry_run=False):
        """(desired providers of the owned nodes among ``records``, {uuid: why} of the
        nodes whose derived traits could not be written).

        Derived-trait writes go to Ironic in parallel while the records stream on.
        ``on_invalid(uuid, reason)`` hears of each unreadable record; ``views``, a
        list, collects each owned node's model.Node.
        """
        desired, writes, failures = [], [], {}
        self.read_again = set()
        pool = None
        probe_only = self._writes_refused()
        if self.tenancy is not None:
            self.tenancy.start_pass()
        try:
            for record in records:
                try:
                    node = model.node_from_api(record)
                except model.InvalidNode as e:
                    uuid = str(record.get("uuid") if isinstance(record, dict) else record)[:64]
                    self.note_skipped(uuid, str(e))
                    on_invalid(uuid, f"invalid node record: {e}")
                    continue
                if not owns(node.uuid) or self._tenancy_refused(node, failures, dry_run):
                    continue
                if self.node_traits is not None and self.busy(node.uuid):
                    # The queue's fresher read judges its derived traits, not this pass.
                    self.problems.keep(node.uuid)
                    self.read_again.add(node.uuid)
                elif self.node_traits is not None and self.plan_traits(record) is not None:
                    # What its derived traits came to is a sync's read to say.
                    self.read_again.add(node.uuid)
                    if dry_run:
                        node = self.with_derived_traits(record, node, dry_run=True)
                    elif not (probe_only and writes):
                        pool = pool or concurrent.futures.ThreadPoolExecutor(self.workers)
                        writes.append(pool.submit(self._write_traits, record, node, failures))
                        continue
                if views is not None:
                    views.append(node)
                desired.append(self.desired(node))
            for write in writes:
                node = write.result()
                if views is not None:
                    views.append(node)
                desired.append(self.desired(node))
        finally:
            if pool is not None:
                pool.shutdown(wait=True)
        return desired, failures

    # -- one node, read and synced ---------------------------------------------
    def sync(self, uuid):
        """Make Placement match node ``uuid`` as Ironic has it now.

        Returns a NodeResult; raises errors.ServiceError (Ironic's or Placement's:
        its ``section`` says which) and errors.Fenced, for the caller to retry.
        A 404 is no proof the node is gone (scoped credentials see one too): only
        the reconcile pass deletes, on complete listings an interval apart.
        """
        started = time.monotonic()
        record = self.ironic.get_node(uuid, self.extra_fields)
        read_seconds = time.monotonic() - started
        if record is None:
            LOG.debug("node %s: not found in Ironic; left to the reconcile pass", uuid)
            return NodeResult(uuid, not_synced="not found")
        if not self.ironic.in_scope(record):
            return NodeResult(uuid, not_synced="foreign")
        try:
            node = model.node_from_api(record)
        except model.InvalidNode as e:
            self.note_skipped(uuid, str(e))
            return NodeResult(uuid, not_synced="invalid")
        if self.tenancy is not None:  # nothing written before its aggregates exist
            self.tenancy.prepare(node)
        # Derived traits go to Ironic first (the truth), then to the provider in
        # this same sync: no wait for a notification of that write.  If Ironic
        # refuses them, Placement still gets the node as Ironic has it.
        trait_error = None
        try:
            node = self.with_derived_traits(record, node)
        except errors.ServiceError as e:  # logged once by trait_writes or problems
            trait_error = e
        result = self.provider_sync.sync(self.desired(node), provider.USE_CACHE)
        return NodeResult(uuid, result=result, trait_error=trait_error,
                          read_seconds=read_seconds)

    def sync_listed(self, desired):
        """Make Placement match ``desired``, which a reconcile pass made of its listing
        of the node: no read of the node's own (the caller knows nothing happened to
        the node since that listing began).  Returns a NodeResult; raises as ``sync``."""
        return NodeResult(desired.uuid, result=self.provider_sync.sync(desired,
                                                                       provider.USE_CACHE))


def _names(traits):
    return ", ".join(sorted(traits)) or "none"
