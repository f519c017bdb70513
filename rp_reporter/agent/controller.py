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
"""

import logging
import time

from rp_reporter import errors
from rp_reporter.sync import provider

LOG = logging.getLogger("rp_reporter.agent")


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
        self.queue.add(uuid, urgent=True)  # ahead of a resync's keys

    def on_bad_notification(self, reason):
        self.metrics.notifications.labels("invalid").inc()

    def on_members_changed(self, taken_over):
        """The ring changed: recently changed nodes now ours go first, then a resync."""
        for uuid in taken_over:
            self.queue.add(uuid, urgent=True)
        self.ring_changed()

    def enqueue(self, uuids):
        """The resync's keys, behind the notifications'."""
        for uuid in uuids:
            self.queue.add(uuid)
        self.metrics.queue_depth.set(self.queue.depth())  # not only when a sync ends

    # -- the one sync function ------------------------------------------------
    def sync_node(self, uuid):
        """The per-node sync of ``uuid``, with the agent's health and metrics; False
        to retry it with backoff."""
        started = time.time()
        try:
            done = self.node_sync.sync(uuid)
        except errors.ServiceError as e:
            if e.section == "placement":
                self.outages["ironic"].ok()  # the node was read
            return self._failed(e)
        except errors.Fenced as e:  # the resync after unfencing looks at it again
            LOG.info("node %s: %s", uuid, e)
            return False
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
