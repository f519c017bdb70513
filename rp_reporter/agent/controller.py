"""The agent's controller: producers name nodes, one work queue syncs them.

Two producers feed one de-duplicating work queue of node uuids, and one
per-node sync (``sync/node.py``) makes Placement match each node:

* the fast path: Ironic's versioned notifications (an oslo.messaging listener
  in this agent's own pool) name a node;
* the reconcile loop: at start, then every ``[reconcile] interval`` seconds
  (jittered), one bulk observation names the nodes that differ; nodes with no
  provider yet are created in bulk first (``Reconciler.create_in_bulk``).

With ``[reconcile] share_listing`` one member lists for the ring and the others
run their passes on the slices it casts them (``listing_bus.py``): a member's
loop then waits for its slice, and lists by itself only when none comes.

Ownership and fencing are ``ownership.py``'s; what ``/healthz`` says, and the
threads kept alive, ``health.py``'s; the command line, ``cmd.py``'s.
"""

import logging
import os
import random
import threading
import time

from rp_reporter import errors
from rp_reporter import log as rp_log
from rp_reporter import metrics as rp_metrics
from rp_reporter import preflight
from rp_reporter import state as rp_state
from rp_reporter import wiring
from rp_reporter.agent import health as rp_health
from rp_reporter.agent import latency
from rp_reporter.agent import ownership as rp_ownership
from rp_reporter.agent import resync as rp_resync
from rp_reporter.agent import rules as rp_rules
from rp_reporter.outage import Outage
from rp_reporter.sync import provider
from rp_reporter.sync import queue as work_queue

LOG = logging.getLogger("rp_reporter.agent")
# The ring holds this many heartbeats before an agent's first pass (agents started
# together joined within 1.2 s of each other at 10^5 nodes, heartbeat 1 s).
SETTLE_HEARTBEATS = 3


class Agent:
    def __init__(self, conf, rules=None):
        self.conf = conf
        self.metrics = rp_metrics.Metrics()
        self.ownership = rp_ownership.Ownership(conf)
        self.reconciler = wiring.reconciler(conf, owns=self.ownership.owns)
        # One per-node sync (and so one cache) for the resync and the work queue.
        self.nodes = self.reconciler.nodes
        self.ironic, self.syncer = self.nodes.ironic, self.nodes.syncer
        self.use_rules(rules)
        self.queue = work_queue.WorkQueue(self.sync_node, workers=conf.agent.workers,
                                          wanted=self.ownership.owns,
                                          backoff_max=conf.agent.retry_max,
                                          on_done=self._synced)
        # A node the queue has gets its derived traits from the queue's fresher read,
        # not from the resync's listing (a stale write would undo a change).
        self.nodes.busy = self.queue.has
        # No write leaves this agent after its fencing deadline, nor for a node that
        # is no longer its own, however long a sync under way keeps retrying.
        self.syncer.placement.write_guard = self.ownership.check_lease
        self.ironic.write_guard = self.ownership.check_lease
        self.syncer.guard = self.ownership.check_owner
        self.deps = {"ironic": Outage("Ironic"), "placement": Outage("Placement")}
        self.stopping = threading.Event()
        self.wake = threading.Event()  # resync now (start, membership change, stop)
        self.leaving = threading.Event()  # renewals end: the last step of stopping
        self.threads = rp_health.Supervisor(self.stopping)
        self.health = rp_health.Health(self.metrics, self.ownership, self.deps,
                                       self.nodes.trait_writes, self.threads,
                                       pass_due=self.pass_due)
        self.pass_ = rp_resync.Resync(self.reconciler, self.ownership, self.metrics, self.deps,
                                      self.health, self._enqueue, self.stopping)
        self.listener = None
        self.sharing = None  # listing_bus.Sharing once its bus is up
        self._slice_expected = True  # the lister lists at a start and a ring change
        self.clock = latency.FastPathClock(self.metrics.event_to_write)

    def use_rules(self, rules):
        """Keep derived traits in step by these rules from now on (None: not at all)."""
        self.nodes.node_traits = rp_rules.node_traits(self.ironic, rules)

    def healthy(self):
        return self.health.healthy()

    # -- producers ---------------------------------------------------------
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
        self._slice_expected = True
        self.wake.set()

    def resync(self, listing=None):
        """One periodic reconcile pass (``resync.Resync``) on ``listing``, the lister's
        slice, or on this agent's own listings, teed to the members when it lists for
        them.  False when the pass could not run (the next one then comes sooner)."""
        tee = self.sharing.tee() if self.sharing and listing is None else None
        return self.pass_.run(listing, tee)

    # -- the work queue's sync ---------------------------------------------
    def sync_node(self, uuid):
        """The per-node sync of ``uuid``, with the agent's health and metrics; False
        to retry it with backoff."""
        started = time.time()
        try:
            done = self.nodes.sync(uuid)
        except errors.ServiceError as e:
            if e.section == "placement":
                self.deps["ironic"].ok()  # the node was read
            return self._failed(e)
        except errors.Fenced as e:  # the resync after unfencing looks at it again
            LOG.info("node %s: %s", uuid, e)
            return False
        self.deps["ironic"].ok()
        if done.not_synced == "foreign":
            self.reconciler.note_foreign(uuid)
        elif done.not_synced == "invalid":
            self.metrics.failures.labels("invalid_node").inc()
        if done.result is None:
            return True
        self.deps["placement"].ok()
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
        self.deps[error.section].failed(error)
        self.metrics.failures.labels(error.section if error.retryable else error.kind).inc()
        return not error.retryable

    def _enqueue(self, uuids):
        for uuid in uuids:
            self.queue.add(uuid)
        self.metrics.queue_depth.set(self.queue.depth())  # not only when a sync ends

    def _synced(self, key, ok):
        if ok:
            self.clock.synced(key)
        self.metrics.queue_depth.set(self.queue.depth())

    # -- lifecycle -----------------------------------------------------------
    def stop(self, signum=None, frame=None):
        LOG.info("stopping (signal %s)", signum)
        rp_log.sd_notify("STOPPING=1")
        self.stopping.set()
        self.wake.set()

    def reload_rules(self):
        """The trait rules read again; a bad file keeps the rules in force (one line)."""
        try:
            rules = rp_rules.load_rules(self.conf)
        except ValueError as e:
            LOG.error("trait rules not reloaded, the rules in force are kept: %s", e)
            return False
        self.use_rules(rules)
        if rules is not None:
            LOG.info("trait rules reloaded from %s", self.conf.traits.rules_file)
            self.wake.set()  # a resync puts every node in step with the new rules
        return True

    def pass_due(self):
        """How old the last completed pass may be before /healthz fails: two of this
        agent's cycles (its jittered interval, and a member's longest wait for its
        slice)."""
        reconcile = self.conf.reconcile
        waits = (self.sharing.wait_max()
                 if self.sharing is not None and not self.sharing.lists() else 0)
        return 2 * (reconcile.interval * (1 + reconcile.jitter) + waits)

    def next_wait(self):
        interval, jitter = self.conf.reconcile.interval, self.conf.reconcile.jitter
        return interval * random.uniform(1 - jitter, 1 + jitter)

    def wait_supervising(self, seconds):
        """Wait for the next pass (or a wake-up), restarting any supervised thread
        that dies meanwhile: a dead thread costs one heartbeat, not a pass."""
        deadline = time.monotonic() + seconds
        while not self.wake.is_set():
            self.supervise()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.wake.wait(min(left, self.conf.coordination.heartbeat))

    def supervise(self):
        """Start dead threads again (the membership, fencing and queue workers)."""
        died = self.threads.check(extra=self.queue.revive())
        for name, _ in died:
            self.metrics.threads_restarted.labels(name.rstrip("0123456789-")).inc()
        if died:
            self.wake.set()  # a resync requeues whatever a dead thread held

    def start_listener(self):
        if not self.conf.notifications.transport_url:
            LOG.warning("no [notifications] transport_url: reconcile loop only, every %s s",
                        self.conf.reconcile.interval)
            return
        from rp_reporter.sync import events  # only now: oslo.messaging is heavy

        endpoint = events.NotificationEndpoint(self.on_notification, self.on_bad_notification)
        self.listener = events.listener(self.conf, endpoint)
        LOG.info("listening for Ironic notifications on topic %s",
                 self.conf.notifications.topic)
        if self.conf.reconcile.share_listing and not self.conf.reconcile.shared_listing_keys:
            LOG.warning("[reconcile] share_listing is on but shared_listing_keys is empty: "
                        "no listing is shared, every agent lists by itself")
        elif self.conf.reconcile.share_listing:
            from rp_reporter.agent import listing_bus  # oslo.messaging, as above

            self.sharing = listing_bus.Sharing(
                self.conf, self.ownership, lambda: self.nodes.extra_fields,
                arrived=self.wake.set,
                dropped=lambda kind, reason: self.metrics.listing_dropped.labels(kind).inc(),
                cast_failed=self.metrics.listing_casts_failed.inc,
                deployment=rp_state.identity_hash(wiring.identity(self.conf))).start()
            self.health.casts = self.sharing.casts

    def listing_for_pass(self):
        """The lister's slice for this pass, or None: list by myself (``Sharing.slice``
        decides).  A member expects one at once after a start or a ring change, when the
        lister lists at once."""
        expected, self._slice_expected = self._slice_expected, False
        if self.sharing is None:
            return None
        ring = self.ownership.ring
        listing = self.sharing.slice(expected, self.stopping, self.wake)
        if listing is not None:
            # A slice on the ring seen now serves a ring change that came while waiting,
            # and its arrival's wake-up is used up by this pass: without this a member
            # ran a second pass at once, waiting for a listing the lister makes only at
            # its interval (seen: agents started together each then listed by itself).
            self._slice_expected = False
            self.wake.clear()
            if self.ownership.ring is not ring:  # changed meanwhile after all
                self._slice_expected = True
                self.wake.set()
        return listing

    def log_preflight(self):
        """The checks of `rp-reporter check` but the listings, once at start, logged
        (never fatal)."""
        levels = {preflight.OK: logging.INFO, preflight.WARN: logging.WARNING}
        try:
            # Not the two full listings: the first pass makes them (a member takes
            # them from the lister), and at a large fleet's start each agent's own
            # pair slowed the lister's first listing past the members' wait.
            rows = preflight.run(self.conf, listings=False)
        except Exception:
            LOG.exception("start-up checks could not run")
            return
        for row in rows:
            LOG.log(levels.get(row.result, logging.ERROR), "check %s: %s: %s", row.check,
                    row.result, row.detail)

    def run(self):
        LOG.info("agent %s starting", self.conf.host)
        if self.conf.agent.metrics_bind:
            try:
                rp_metrics.serve(self.metrics, self.healthy, self.conf.agent.metrics_bind)
            except (OSError, ValueError) as e:
                LOG.error("cannot serve [agent] metrics_bind = %s: %s",
                          self.conf.agent.metrics_bind, e)
                return 2
        # Renewed until the agent leaves, not until it stops: its queue still writes
        # while it stops, and a lease that lapsed meanwhile would keep it from leaving.
        self.threads.start("membership", lambda: self.ownership.renew(
            self.leaving, self.on_members_changed))
        # The first pass wants the whole ring; a backend that does not answer within a
        # lease is joined later (the agent writes nothing until then).
        self.ownership.joined.wait(self.conf.coordination.lease)
        # The first pass on the ring the agents started together end up with, not on
        # one seen while they joined (a few heartbeats in a group; a fixed ring: none).
        self.ownership.settle(SETTLE_HEARTBEATS * self.conf.coordination.heartbeat,
                              self.conf.coordination.lease, self.stopping)
        self.threads.start("fencing", lambda: self.ownership.watch_fencing(
            self.stopping, self.queue.pause, self.wake.set))
        self.queue.start()
        self.start_listener()
        self.health.ready.set()
        rp_log.sd_notify(f"READY=1\nSTATUS=serving /healthz; listener bound\nMAINPID={os.getpid()}")
        threading.Thread(target=self.log_preflight, name="preflight", daemon=True).start()
        while not self.stopping.is_set():
            self.cycle()
        self.shut_down()
        LOG.info("agent %s stopped", self.conf.host)
        return 0

    def cycle(self):
        """One turn of the loop: a pass (unless fenced), then the wait for the next."""
        self.wake.clear()
        done = True
        if not self.ownership.fenced:
            listing = self.listing_for_pass()
            if self.stopping.is_set():
                return  # stopping never starts a listing
            started = time.monotonic()
            self.health.began()
            with self.metrics.reconciling.track_inprogress():
                try:
                    done = self.resync(listing)
                except Exception:  # a bug: this pass is lost, the agent is not
                    LOG.exception("reconcile pass failed")
                    done = False
            if done:
                self.threads.recovered(started)
                self.health.passed()
        # A pass that could not run (an outage, a refused permission, Keystone or
        # the catalog misconfigured) is tried again within [agent] retry_max, so
        # the agent recovers by itself soon after the cause is fixed.  A member
        # waits past its interval for the lister's slice, which wakes it.
        wait = self.next_wait() if done else min(self.next_wait(), self.conf.agent.retry_max)
        if done and self.sharing is not None and not self.sharing.lists():
            wait += self.sharing.wait()
        self.wait_supervising(wait)

    def shut_down(self):
        """Receivers and queue, then membership last.

        Both oslo.messaging servers stop at once, each in a thread: a server's stop
        returns only once its poll does (up to 5 s in the rabbit driver), and one
        after the other took up to 15 s, long enough for the lease to lapse (the agent
        then left without leaving its group, and its peers waited a lease for its
        nodes) and for a supervisor's patience to run out."""
        started = time.monotonic()
        steps = {}

        def timed(step, fn, *args, **kwargs):
            began = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                steps[step] = time.monotonic() - began

        receivers = []  # (name, stop receiving, let what was received finish)
        if self.listener:
            receivers.append(("notifications", self.listener.stop, self.listener.wait))
        if self.sharing:
            receivers.append(("shared listing", self.sharing.stop, self.sharing.stopped))
        threads = [threading.Thread(target=timed, args=(name, lambda s=stop, f=finish: (s(), f())))
                   for name, stop, finish in receivers]
        for thread in threads:
            thread.start()
        timed("work queue", self.queue.stop, timeout=6)
        for thread in threads:
            thread.join()
        self.leaving.set()
        # A renewal blocked on an unreachable backend is not waited for: the group's
        # stop sees the lapsed lease and does not call the backend again.
        timed("renewals", self.threads.join, "membership",
              timeout=2 * self.conf.coordination.heartbeat)
        timed("leaving", self.ownership.membership.stop)
        LOG.info("shut down in %.1f s (%s)", time.monotonic() - started,
                 ", ".join(f"{step} {seconds:.1f} s" for step, seconds in steps.items()))
