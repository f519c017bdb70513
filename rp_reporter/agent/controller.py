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

"""The agent's controller: handlers that only enqueue, and the one sync function.

Three producers name nodes; none syncs one itself:

* the fast path: Ironic's versioned notifications (an oslo.messaging listener
  in this agent's own pool) name a node, urgently;
* a change of ring members: the nodes recently changed while another agent
  owned them go first, then a resync;
* the periodic resync (``resync.py``): the nodes that differ.

The work queue (``sync/queue.py``) de-duplicates them, and its workers call
``sync_node``: the one per-node sync (``sync/node.py``), whose result becomes
the queue's answer (False: retry with backoff), the services' outages and the
metrics.

A resync's key comes with what the pass's listing makes of the node, and its sync
uses that instead of reading the node again, as a sample-controller's sync reads
its lister's cache.  Another writer (nova's resource tracker, above all) moves
providers' generations without any change in Ironic, and a read per node would
cost Ironic one request for each.  Only while nothing happened to the node since
its listing began: a notification, a takeover or a sync of it since then, or one
arriving before its sync, and the sync reads the node itself.
"""

import logging
import math
import threading
import time

from rp_reporter import errors
from rp_reporter.sync import provider

LOG = logging.getLogger("rp_reporter.agent")
# How long before a listing's hand-over a node's last notification, takeover or sync
# is still remembered: far longer than a listing a pass uses is old (the shared
# listing's freshness bound is one [reconcile] interval, and the lister's clock one
# more).  A hand-over of a listing older than what is remembered has no hints.
TOUCHED_HORIZON = 3 * 3600.0


class Controller:
    def __init__(self, queue, node_sync, note_foreign, ownership, metrics, outages, clock,
                 ring_changed):
        self.queue = queue  # sync/queue.WorkQueue of node uuids, not started yet
        self.node_sync = node_sync  # sync/node.NodeSync: the one per-node sync
        self.note_foreign = note_foreign  # uuid -> None: a node outside this scope
        self.ownership = ownership
        self.metrics = metrics
        self.outages = outages  # {section: Outage}
        self.clock = clock  # latency.FastPathClock
        self.ring_changed = ring_changed  # () -> None: a resync now, on the new ring
        self._lock = threading.Lock()
        # {uuid: model.Desired} of the last resync, for the keys it queued; and when
        # each node was last notified, taken over or synced (time.monotonic()), for as
        # long as a listing's hand-over may need to know.
        self._listed = {}
        self._touched = {}
        self._forgotten_before = -math.inf  # what happened before then is forgotten

    def _touch(self, uuid):
        """Something happened to the node: its next sync reads it."""
        with self._lock:
            self._touched[uuid] = time.monotonic()
            self._listed.pop(uuid, None)

    def start(self):
        self.queue.start(self.sync_node, on_done=self._synced)
        return self

    # -- producers: they only enqueue -----------------------------------------
    def on_notification(self, uuid, event_type, sent_at):
        if not self.ownership.owns(uuid):
            self.metrics.notifications.labels("not_owned").inc()
            self.ownership.note_unowned(uuid)  # for a takeover
            return
        self.metrics.notifications.labels("accepted").inc()
        self.clock.noted(uuid, sent_at)
        self._touch(uuid)
        self.queue.add(uuid, urgent=True)  # ahead of a resync's keys

    def on_bad_notification(self, reason):
        self.metrics.notifications.labels("invalid").inc()

    def on_members_changed(self, taken_over):
        """The ring changed: recently changed nodes now ours go first, then a resync."""
        for uuid in taken_over:
            self._touch(uuid)
            self.queue.add(uuid, urgent=True)
        self.ring_changed()

    def enqueue(self, uuids, listed=None, listed_since=None):
        """The resync's keys, behind the notifications'.  ``listed``: {uuid:
        model.Desired} its listing makes of them, every record read after
        ``listed_since`` (time.monotonic()); they replace the last resync's."""
        if listed is not None:
            with self._lock:
                known = listed_since >= self._forgotten_before
                self._listed = {u: d for u, d in listed.items()
                                if known and self._touched.get(u, -math.inf) < listed_since}
                # What no later hand-over can need (one older than this has no hints).
                self._forgotten_before = max(self._forgotten_before,
                                             listed_since - TOUCHED_HORIZON)
                self._touched = {u: t for u, t in self._touched.items()
                                 if t >= self._forgotten_before}
        for uuid in uuids:
            self.queue.add(uuid)
        self.metrics.queue_depth.set(self.queue.depth())  # not only when a sync ends

    # -- the one sync function ------------------------------------------------
    def sync_node(self, uuid):
        """The per-node sync of ``uuid``, with the agent's health and metrics; False
        to retry it with backoff."""
        started = time.time()
        with self._lock:
            listed = self._listed.pop(uuid, None)
        self.metrics.node_syncs.labels("ironic" if listed is None else "listing").inc()
        try:
            done = (self.node_sync.sync(uuid) if listed is None
                    else self.node_sync.sync_listed(listed))
        except errors.ServiceError as e:
            if e.section == "placement" and listed is None:
                self.outages["ironic"].ok()  # the node was read
            return self._failed(e)
        except errors.Fenced as e:  # the resync after unfencing looks at it again
            LOG.info("node %s: %s", uuid, e)
            return False
        finally:
            self._touch(uuid)
        if listed is None:
            self.outages["ironic"].ok()
        if done.not_synced == "foreign":
            self.note_foreign(uuid)
        elif done.not_synced == "invalid":
            self.metrics.failures.labels("invalid_node").inc()
        if done.result is None:
            return True
        self.outages["placement"].ok()
        self.metrics.record_sync(done.result)
        if done.trait_error is not None:
            self.metrics.failures.labels("traits").inc()
        if done.result.outcome is provider.Outcome.FAILED:
            LOG.warning("node %s: %s; will retry", uuid, done.result.reason)
            self.metrics.failures.labels("conflicts").inc()
            return False
        self.clock.log_if_slow(uuid, started, done)
        # Derived traits Ironic did not take: an outage retries; a refusal waits a pass.
        return done.trait_error is None or not done.trait_error.retryable

    def _failed(self, error):
        """A sync that met a ServiceError: an outage is retried with backoff; a refused
        permission or a bad configuration is not (no retry fixes it), and the next
        reconcile pass tries that node again."""
        self.outages[error.section].failed(error)
        self.metrics.failures.labels(error.section if error.retryable else error.kind).inc()
        return not error.retryable

    def _synced(self, uuid, ok):
        if ok:
            self.clock.synced(uuid)
        self.metrics.queue_depth.set(self.queue.depth())
