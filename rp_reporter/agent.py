"""``rp-reporter-agent``: the daemon that keeps Placement fresh.

Two producers feed one de-duplicating work queue of node uuids; one per-node
sync makes Placement match the node:

* the fast path: Ironic's versioned notifications (oslo.messaging listener in
  this agent's own pool) name a node;
* the reconcile loop: at start, then every ``[reconcile] interval`` seconds
  (jittered), one bulk observation names the nodes that differ.  Nodes with
  no provider yet (a first start on a fleet) are created in bulk first, their
  inventories a batch per POST /reshaper; whatever that path cannot take goes
  to the queue.

With ``[traits] rules_file`` set, both paths also keep each owned node's
derived traits (from its capabilities and other properties) in step on the
Ironic node, and the provider carries them in the same sync.  The rules are
loaded once at start (a bad file: one line, exit 2) and again on SIGHUP (a bad
file then keeps the rules in force, with one log line).

SIGTERM and SIGINT stop it gracefully (in-flight syncs finish, exit 0);
SIGHUP reloads the mutable options (debug, interval, jitter) and the trait
rules, and reopens the log file.  Logging is oslo.log's (rp_reporter.log); under systemd with
Type=notify the agent says READY=1 once /healthz is served and the listener is
bound.
"""

import collections
import concurrent.futures
import logging
import os
import random
import signal
import sys
import threading
import time

from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter import log as rp_log
from rp_reporter import membership as rp_membership
from rp_reporter import metrics as rp_metrics
from rp_reporter import model
from rp_reporter import preflight
from rp_reporter import supervisor as rp_supervisor
from rp_reporter import wiring
from rp_reporter.outage import Outage
from rp_reporter.sync import provider
from rp_reporter.sync import queue as work_queue

LOG = logging.getLogger("rp_reporter.agent")
# Notifications remembered for nodes another agent owned (oldest dropped first).
RECENT_EVENTS_MAX = 10_000


def load_rules(conf):
    """The trait rules of ``[traits] rules_file``, or None when it is unset; a bad
    file raises ValueError, in one line naming the option, the file and the place."""
    path = conf.traits.rules_file
    if not path:
        return None
    from rp_reporter import traits as capabilities  # only with rules: no cost for the others

    try:
        return capabilities.load_rules(path)
    except capabilities.RulesError as e:
        raise ValueError(f"[traits] rules_file: {e}") from None


class Agent:
    def __init__(self, conf, rules=None):
        self.conf = conf
        self.metrics = rp_metrics.Metrics()
        self.reconciler = wiring.reconciler(conf, owns=self.owns)
        # One syncer (and so one cache) for the resync and the work queue.
        self.ironic, self.syncer = self.reconciler.ironic, self.reconciler.syncer
        self.use_rules(rules)
        self.queue = work_queue.WorkQueue(self.sync_node, workers=conf.agent.workers,
                                          wanted=self.owns, backoff_max=conf.agent.retry_max,
                                          on_done=self._synced)
        # A node the queue has gets its derived traits from the queue's fresher read,
        # not from the resync's listing (a stale write would undo a change).
        self.reconciler.busy = self.queue.has
        self.deps = {"ironic": Outage("Ironic"), "placement": Outage("Placement")}
        self.ironic_dep, self.placement_dep = self.deps["ironic"], self.deps["placement"]
        self.deletion_refused = None  # the deletion guard's line while it refuses
        self.stopping = threading.Event()
        self.wake = threading.Event()  # resync now (start, membership change, stop)
        self.ready = threading.Event()  # listener bound: events from now on are seen
        self.listener = None
        self.membership = rp_membership.from_conf(conf)
        self.threads = rp_supervisor.Supervisor(self.stopping)
        # No write leaves this agent after its fencing deadline, nor for a node that
        # is no longer its own, however long a sync under way keeps retrying.
        self.syncer.placement.write_guard = self.ironic.write_guard = self.check_lease
        self.syncer.guard = self.check_owner
        self._event_sent_at = {}  # uuid -> earliest notification not yet synced
        self._unowned_events = collections.OrderedDict()  # uuid -> when, another's node
        self._event_lock = threading.Lock()
        self.ring = self._ring({conf.host})
        self.ring_joined = False  # a member of the ring at least once
        self._export_health()

    def use_rules(self, rules):
        """Keep derived traits in step by these rules from now on (None: not at all)."""
        if rules is None:
            self.reconciler.node_traits = None
            return
        from rp_reporter.sync import capability_traits

        self.reconciler.node_traits = capability_traits.NodeTraits(self.ironic, rules)

    def _export_health(self):
        """/healthz's answer as gauges, read at each scrape."""
        self.metrics.healthy.set_function(lambda: float(self.healthy()[0]))
        self.metrics.fenced.set_function(lambda: float(bool(self.membership.fenced)))
        for section, dep in self.deps.items():
            self.metrics.dependency_up.labels(section).set_function(
                lambda dep=dep: float(dep.down_since is None))

    # -- ownership ------------------------------------------------------------
    def _ring(self, members):
        return wiring.ring(self.conf, members)

    def owns(self, uuid):
        """This agent syncs the node: it is a live, unfenced member and the ring says so."""
        return not self.membership.fenced and self.ring.owner(uuid) == self.conf.host

    def check_lease(self):
        """Raise errors.Fenced once the membership lease lapsed (before a write)."""
        if self.membership.fenced:
            raise errors.Fenced("membership lease lapsed: not written")

    def check_owner(self, uuid):
        """Raise errors.Fenced unless this agent may write node ``uuid`` now."""
        if not self.owns(uuid):
            raise errors.Fenced(f"node {uuid} is not this agent's now: not written")

    def renew_membership(self):
        """Renew membership every heartbeat; on a change of members, rebuild the ring
        and resync at once (newly owned nodes are synced; released ones are left alone)."""
        while not self.stopping.is_set():
            members = self.membership.tick()
            self.ring_joined = self.ring_joined or bool(members)
            if members and members != self.ring.members:
                LOG.info("ring members now %s", sorted(members))
                self.ring = self._ring(members)
                self.take_over_recent_events()
                self.wake.set()
            self.stopping.wait(self.conf.coordination.heartbeat)

    def take_over_recent_events(self):
        """Nodes named by notifications while another agent owned them, within the last
        two leases: the ones this agent owns now go ahead of the resync, since their
        owner may have died before syncing them (a takeover then costs the detection
        and one sync, not a place in the resync of every newly owned node)."""
        horizon = time.monotonic() - 2 * self.conf.coordination.lease
        with self._event_lock:
            recent = [u for u, seen in self._unowned_events.items() if seen >= horizon]
            self._unowned_events.clear()
        taken = [uuid for uuid in recent if self.owns(uuid)]
        for uuid in taken:
            self.queue.add(uuid, urgent=True)
        if taken:
            LOG.info("%d recently changed nodes are now this agent's: synced first", len(taken))

    def watch_fencing(self):
        """Stop the queue while fenced; resync when the membership is renewed, since
        what arrived meanwhile was dropped (``owns`` said no).

        Apart from the renewals, because one renewal can block through a whole
        outage; ``lapses`` shows a lapse that began and ended inside one renewal.
        """
        was_fenced, lapses = False, self.membership.lapses
        while not self.stopping.wait(self.conf.coordination.heartbeat):
            renewed_after_lapse = self.membership.lapses != lapses
            lapses = self.membership.lapses
            fenced = self.membership.fenced
            if fenced and not was_fenced:
                self.queue.pause(True)
                LOG.warning("fenced: membership not renewed in time, writes stopped")
            elif not fenced and (was_fenced or renewed_after_lapse):
                self.queue.pause(False)
                LOG.warning("unfenced: membership renewed, writes resume; resyncing for "
                            "what was dropped while fenced")
                self.wake.set()
            was_fenced = fenced

    # -- producers ---------------------------------------------------------
    def on_notification(self, uuid, event_type, sent_at):
        if not self.owns(uuid):
            self.metrics.notifications.labels("not_owned").inc()
            with self._event_lock:  # for a takeover (take_over_recent_events)
                self._unowned_events[uuid] = time.monotonic()
                self._unowned_events.move_to_end(uuid)
                while len(self._unowned_events) > RECENT_EVENTS_MAX:
                    self._unowned_events.popitem(last=False)
            return
        self.metrics.notifications.labels("accepted").inc()
        sent_at = sent_at or time.time()
        with self._event_lock:
            self._event_sent_at[uuid] = min(sent_at, self._event_sent_at.get(uuid, sent_at))
        self.queue.add(uuid, urgent=True)  # ahead of a resync's keys

    def on_bad_notification(self, reason):
        self.metrics.notifications.labels("invalid").inc()

    def resync(self):
        """One periodic reconcile: bulk observation, enqueue what differs.  Returns
        False when the pass could not run (the next one then comes sooner)."""
        started = time.monotonic()
        try:
            drift = self.reconciler.drift()
        except errors.ServiceError as e:
            self.deps[e.section].failed(e)
            return False
        except Exception:  # a bug: this pass is lost, the agent is not
            LOG.exception("reconcile pass failed")
            return False
        self.ironic_dep.ok()
        self.placement_dep.ok()
        self.apply_verdict(drift.verdict)
        self._enqueue(drift.keys)
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
        return True

    def apply_verdict(self, verdict):
        """Delete the providers whose nodes are proven gone, or say why none is."""
        if verdict.refused:
            LOG.error("deletion refused: %s", verdict.refused)
            self.metrics.deletions_refused.labels(verdict.reason).inc()
        elif self.deletion_refused:
            LOG.warning("deletion guard: this pass is within bounds again")
        self.deletion_refused = verdict.refused
        self.metrics.providers_absent.set(len(verdict.waiting))
        for uuid in verdict.delete:
            if self.owns(uuid):
                self.metrics.record_sync(self.reconciler.delete(uuid))

    def create_in_bulk(self, new):
        """Providers Placement does not have yet (a first start on a fleet), their
        inventories a batch per request.  What leaves the bulk path goes to the work
        queue, as does what is left when the agent stops, is fenced or Placement
        fails, so nothing is lost.

        ``new`` is used up chunk by chunk, so its desired providers are freed as the
        cache fills instead of being held beside it to the end (memory, at 100,000
        nodes: ``tox -e bench -- rss``).
        """
        total, created = len(new), 0
        LOG.info("reconcile: %d nodes have no provider, creating in bulk", total)
        batch = self.reconciler.bulk_batch
        # A few batches per chunk, so their POST /reshaper requests overlap.
        chunk_size = batch * provider.RESHAPERS
        with concurrent.futures.ThreadPoolExecutor(self.conf.reconcile.workers) as pool:
            while new:
                if self.stopping.is_set() or self.membership.fenced:
                    self._enqueue(d.uuid for d in new)
                    break
                chunk = new[-chunk_size:]
                del new[-chunk_size:]
                # A node the queue has already (its notification came first) is
                # left to it: both would write, and one would meet a conflict.
                chunk = [d for d in chunk if self.owns(d.uuid) and not self.queue.has(d.uuid)]
                try:
                    results = list(self.syncer.create_many(chunk, pool, batch,
                                                           self._enqueue_one))
                except errors.ServiceError as e:  # the queue retries with backoff
                    self.deps[e.section].failed(e)
                    self._enqueue(d.uuid for d in chunk + new)
                    break
                except errors.Fenced as e:  # the resync after unfencing takes the rest
                    LOG.warning("bulk creation stopped: %s", e)
                    self._enqueue(d.uuid for d in chunk + new)
                    break
                for result in filter(None, results):
                    self.metrics.record_sync(result)
                    created += 1
        LOG.info("reconcile: %d of %d providers created in bulk; the rest go through the "
                 "work queue", created, total)

    # -- the one per-node sync --------------------------------------------
    def sync_node(self, uuid):
        """Make Placement match node ``uuid`` as Ironic has it now; False to retry."""
        trait_error = None
        try:
            record = self.ironic.get_node(uuid, self.reconciler.extra_fields)
        except errors.ServiceError as e:
            return self._failed(e)
        self.ironic_dep.ok()
        try:
            if record is None:
                # Not proof the node is gone (scoped credentials see a 404 too): only
                # the reconcile pass deletes, on complete listings an interval apart.
                LOG.debug("node %s: not found in Ironic; left to the reconcile pass", uuid)
                return True
            elif not self.ironic.in_scope(record):
                self.reconciler.note_foreign(uuid)
                return True
            else:
                try:
                    node = model.node_from_api(record)
                except model.InvalidNode as e:
                    self.reconciler.problems.note(uuid, f"skipped: {e}")
                    self.metrics.failures.labels("invalid_node").inc()
                    return True
                # Derived traits go to Ironic first (the truth), then to the provider
                # in this same sync: no wait for a notification of that write.  If
                # Ironic refuses them, Placement still gets the node as Ironic has it.
                try:
                    node = self.reconciler.with_derived_traits(record, node)
                except errors.ServiceError as e:  # logged once by reconciler.trait_writes
                    trait_error = e
                    self.metrics.failures.labels("traits").inc()
                result = self.syncer.sync(self.reconciler.desired(node), provider.USE_CACHE)
        except errors.ServiceError as e:
            return self._failed(e)
        except errors.Fenced as e:  # the resync after unfencing looks at it again
            LOG.info("node %s: %s", uuid, e)
            return False
        self.placement_dep.ok()
        self.metrics.record_sync(result)
        if result.outcome is provider.Outcome.FAILED:
            LOG.warning("node %s: %s; will retry", uuid, result.reason)
            self.metrics.failures.labels("conflicts").inc()
            return False
        # Derived traits Ironic did not take: an outage retries; a refusal waits a pass.
        return trait_error is None or not trait_error.retryable

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

    def _enqueue_one(self, desired):
        """The bulk path's fallback: that node goes through the queue (no Result)."""
        self._enqueue([desired.uuid])

    def _synced(self, key, ok):
        if ok:  # only notification-driven syncs count as event-to-write
            with self._event_lock:
                sent_at = self._event_sent_at.pop(key, None)
            if sent_at is not None:
                self.metrics.event_to_write.observe(max(0.0, time.time() - sent_at))
        self.metrics.queue_depth.set(self.queue.depth())

    # -- lifecycle ---------------------------------------------------------
    def healthy(self):
        if self.stopping.is_set():
            return False, "stopping"
        if not self.ready.is_set():
            return False, "starting"
        if self.membership.fenced:
            down = self.membership.down
            if self.membership.lapses == 0 and down is not None and not self.ring_joined:
                return False, f"not a member yet: coordination backend: {down}"
            return False, "fenced: membership not renewed"
        thread_problem = self.threads.problem()
        if thread_problem:
            return False, thread_problem
        for dep in (*self.deps.values(), self.reconciler.trait_writes):
            if dep.down_since is not None:
                return False, f"{dep.name}: {dep.error}"
        if self.deletion_refused:
            return False, f"deletion refused: {self.deletion_refused}"
        return True, "ok"

    def stop(self, signum=None, frame=None):
        LOG.info("stopping (signal %s)", signum)
        rp_log.sd_notify("STOPPING=1")
        self.stopping.set()
        self.wake.set()

    def reload(self, signum=None, frame=None):
        """SIGHUP: off the signal handler, so the main thread is never caught inside
        a log call while its handlers are replaced."""
        threading.Thread(target=self._reload, name="reload", daemon=True).start()

    def _reload(self):
        self.conf.mutate_config_files()
        _setup_logging(self.conf)  # reopens the log file, as OpenStack services do
        LOG.info("reloaded: interval=%s jitter=%s debug=%s; log reopened",
                 self.conf.reconcile.interval, self.conf.reconcile.jitter, self.conf.debug)
        self.reload_rules()

    def reload_rules(self):
        """The trait rules read again; a bad file keeps the rules in force (one line)."""
        try:
            rules = load_rules(self.conf)
        except ValueError as e:
            LOG.error("trait rules not reloaded, the rules in force are kept: %s", e)
            return False
        self.use_rules(rules)
        if rules is not None:
            LOG.info("trait rules reloaded from %s", self.conf.traits.rules_file)
            self.wake.set()  # a resync puts every node in step with the new rules
        return True

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

    def next_wait(self):
        interval, jitter = self.conf.reconcile.interval, self.conf.reconcile.jitter
        return interval * random.uniform(1 - jitter, 1 + jitter)

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

    def log_preflight(self):
        """The checks of `rp-reporter check`, once at start, logged (never fatal)."""
        levels = {preflight.OK: logging.INFO, preflight.WARN: logging.WARNING}
        try:
            rows = preflight.run(self.conf)
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
        self.membership.start()  # a backend that is down: joined once it answers
        self.ring_joined = not self.membership.fenced
        self.ring = self._ring(self.membership.members() or {self.conf.host})
        self.threads.start("membership", self.renew_membership)
        self.threads.start("fencing", self.watch_fencing)
        self.queue.start()
        self.start_listener()
        self.ready.set()
        rp_log.sd_notify(f"READY=1\nSTATUS=serving /healthz; listener bound\nMAINPID={os.getpid()}")
        threading.Thread(target=self.log_preflight, name="preflight", daemon=True).start()
        while not self.stopping.is_set():
            self.wake.clear()
            done = True
            if not self.membership.fenced:
                started = time.monotonic()
                with self.metrics.reconciling.track_inprogress():
                    done = self.resync()
                if done:
                    self.threads.recovered(started)
            # A pass that could not run (an outage, a refused permission, Keystone or
            # the catalog misconfigured) is tried again within [agent] retry_max, so
            # the agent recovers by itself soon after the cause is fixed.
            self.wait_supervising(self.next_wait() if done else
                                  min(self.next_wait(), self.conf.agent.retry_max))
        if self.listener:
            self.listener.stop()
        self.queue.stop(timeout=6)
        if self.listener:
            self.listener.wait()
        self.membership.stop()
        LOG.info("agent %s stopped", self.conf.host)
        return 0


def _setup_logging(conf):
    rp_log.setup(conf)  # oslo.log: log_file, use_json, use_journal, use_syslog, debug


def main(argv=None):
    try:
        conf = rp_conf.load(sys.argv[1:] if argv is None else argv)
        wiring.check(conf)
        rules = load_rules(conf)
    except (cfg.Error, ValueError) as e:
        print(f"rp-reporter-agent: error: bad configuration: {e}", file=sys.stderr)
        return 2
    try:
        _setup_logging(conf)
    except (OSError, RuntimeError, TypeError, ValueError) as e:  # unwritable log_file, bad facility
        print(f"rp-reporter-agent: error: bad logging configuration: {e}", file=sys.stderr)
        return 2
    conf.log_opt_values(LOG, logging.DEBUG)  # oslo.config masks every secret option
    agent = Agent(conf, rules)
    if rules is not None:
        LOG.info("derived traits kept in step by the rules of %s", conf.traits.rules_file)
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    signal.signal(signal.SIGHUP, agent.reload)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
