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

"""One periodic reconcile pass of the agent, and its deletion policy.

The pass observes in bulk (its own listings, or the lister's slice), enqueues the
nodes that differ with what the listing makes of each (a node nothing happened to
since is then synced without a read of its own), creates in bulk the providers that
are missing, and deletes the providers whose nodes are proven gone (``Reconciler``'s
verdict), while the agent still owns them.  What it found goes to the metrics; a
service it could not reach to that service's outage.
"""

import logging
import time

from rp_reporter import errors

LOG = logging.getLogger("rp_reporter.agent")


class Resync:
    def __init__(self, reconciler, ownership, metrics, outages, health, enqueue, stopping):
        self.reconciler = reconciler
        self.ownership = ownership
        self.metrics = metrics
        self.outages = outages    # {section: Outage}
        self.health = health      # the deletion guard's refusal is shown there
        # (uuids, {uuid: listed desired}, listed since) -> the work queue (Controller.enqueue)
        self.enqueue = enqueue
        self.stopping = stopping  # threading.Event: bulk creation stops with the agent

    def run(self, listing=None, tee=None):
        """One periodic reconcile: bulk observation (``listing``, the lister's slice, or
        this agent's own listings, seen by ``tee``), enqueue what differs, create what is
        missing.  Returns False when the pass could not run."""
        started = time.monotonic()
        try:
            drift = self.reconciler.drift(listing=listing, tee=tee)
        except errors.ServiceError as e:  # a bug's exception is the loop's (Agent.cycle)
            self.outages[e.section].failed(e)
            return False
        if listing is None:  # both services answered this agent's own listings
            for outage in self.outages.values():
                outage.ok()
        else:  # the slice proves the lister's access, not this agent's
            self.check_own_access()
        self.metrics.listings.labels("shared" if listing is not None else
                                     "sent" if tee is not None else "own").inc()
        self.apply_verdict(drift.verdict)
        # Since when the listing's records are as fresh as any read (own: this pass).
        if listing is None:
            self.enqueue(drift.keys, drift.listed, started)
        elif listing.read_within is not None:
            self.enqueue(drift.keys, drift.listed, started - listing.read_within)
        else:
            self.enqueue(drift.keys)
        self.metrics.nodes_owned.set(drift.nodes)
        self.metrics.nodes_skipped.set(drift.skipped)
        found = drift.changed + len(drift.new)
        if drift.changed:
            LOG.info("reconcile: %d of %d nodes out of step, queued", drift.changed,
                     drift.nodes)
        if len(drift.keys) > drift.changed:
            LOG.info("reconcile: %d nodes due for re-verification, queued",
                     len(drift.keys) - drift.changed)
        if drift.new:
            new, drift.new = drift.new, None  # used up as it goes
            self.create_in_bulk(new)
        self.reconciler.save_observations()  # a restart then costs two listings
        # Only now: a pass is done when its bulk creation is (watchers wait on this).
        self.metrics.reconcile_seconds.set(time.monotonic() - started)
        self.metrics.reconcile_drift.set(found)
        self.metrics.reconcile_passes.inc()
        return True

    def check_own_access(self):
        """One cheap call to each service with this agent's own credentials: a member
        whose credentials broke says so on /healthz even in a quiet fleet."""
        node_sync = self.reconciler.node_sync
        for section, probe in (("ironic", node_sync.ironic.probe),
                               ("placement", node_sync.provider_sync.placement.probe)):
            try:
                probe()
            except errors.ServiceError as e:
                self.outages[section].failed(e)
            else:
                self.outages[section].ok()

    def create_in_bulk(self, new):
        def should_stop():
            return self.stopping.is_set() or self.ownership.fenced

        try:
            for result in self.reconciler.create_in_bulk(new, self.enqueue, should_stop):
                self.metrics.record_sync(result)
        except errors.ServiceError as e:  # the queue has the rest, and retries
            self.outages[e.section].failed(e)
        except errors.Fenced as e:  # the resync after unfencing takes the rest
            LOG.warning("bulk creation stopped: %s", e)

    def apply_verdict(self, verdict):
        """Delete the providers whose nodes are proven gone, or say why none is."""
        if verdict.refused:
            LOG.error("deletion refused: %s", verdict.refused)
            self.metrics.deletions_refused.labels(verdict.reason).inc()
        elif self.health.deletion_refused:
            LOG.warning("deletion guard: this pass is within bounds again")
        self.health.deletion_refused = verdict.refused
        self.metrics.providers_absent.set(len(verdict.waiting))
        for uuid in verdict.delete:
            if self.ownership.owns(uuid):
                self.metrics.record_sync(self.reconciler.delete(uuid))

