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

"""The agent: builds its pieces, then runs its loop until it stops.

Each piece has a module of its own, and gets what it calls through its
constructor, built here:

* ``ownership``: membership, the ring, fencing, and the guards before writes,
  which the sync machinery gets from ``wiring.reconciler``;
* ``controller``: the handlers that enqueue node uuids, and the one sync function
  the work queue's workers call;
* ``resync``: the periodic reconcile pass and its deletion policy;
* ``slice_wait``: a member's wait for the lister's slice (``listing_bus``);
* ``latency``: the fast path's clock;
* ``health``: what ``/healthz`` says, and the threads kept alive.

The loop: at start, then every ``[reconcile] interval`` seconds (jittered), one
pass (``cycle``); a resync is due at once (``resync_now``) at a ring change, a
reload of the rules, an unfencing, a thread started again and a stop.  The
command line is ``cmd.py``'s.
"""

import logging
import os
import random
import threading
import time

from rp_reporter import conf as rp_conf
from rp_reporter import log as rp_log
from rp_reporter import metrics as rp_metrics
from rp_reporter import preflight
from rp_reporter import state as rp_state
from rp_reporter import wiring
from rp_reporter.agent import controller as rp_controller
from rp_reporter.agent import health as rp_health
from rp_reporter.agent import latency
from rp_reporter.agent import ownership as rp_ownership
from rp_reporter.agent import resync as rp_resync
from rp_reporter.agent import rules as rp_rules
from rp_reporter.agent import slice_wait
from rp_reporter.outage import Outage
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
        self.outages = {"ironic": Outage("Ironic"), "placement": Outage("Placement")}
        self.stopping = threading.Event()
        self.resync_now = threading.Event()  # the loop's next pass starts at once
        self.leaving = threading.Event()  # renewals end: the last step of stopping
        self.queue = work_queue.WorkQueue(workers=conf.agent.workers,
                                          wanted=self.ownership.owns,
                                          backoff_max=conf.agent.retry_backoff_max)
        # No write leaves this agent after its fencing deadline, nor for a node that
        # is no longer its own, however long a sync under way keeps retrying.  A node
        # the queue has gets its derived traits from the queue's fresher read, not
        # from the resync's listing (a stale write would undo a change).
        self.reconciler = wiring.reconciler(conf, owns=self.ownership.owns,
                                            write_guard=self.ownership.check_lease,
                                            owner_guard=self.ownership.check_owner,
                                            busy=self.queue.has)
        # One per-node sync (and so one cache) for the resync and the work queue.
        self.node_sync = self.reconciler.node_sync
        self.use_rules(rules)
        self.threads = rp_health.Supervisor(self.stopping)
        self.health = rp_health.Health(self.metrics, self.ownership, self.outages,
                                       self.node_sync.trait_writes, self.threads,
                                       pass_due=self.pass_due)
        self.slices = slice_wait.SliceWait(self.ownership, self.stopping, self.resync_now)
        self.controller = rp_controller.Controller(
            self.queue, self.node_sync, self.reconciler.note_foreign, self.ownership,
            self.metrics, self.outages, latency.FastPathClock(self.metrics.event_to_write),
            ring_changed=self.slices.ring_changed)
        self.resync = rp_resync.Resync(self.reconciler, self.ownership, self.metrics,
                                       self.outages, self.health, self.controller.enqueue,
                                       self.stopping)
        self.listener = None
        self.sharing = None  # listing_bus.Sharing once its bus is up

    def use_rules(self, rules):
        """Keep derived traits in step by these rules from now on (None: not at all)."""
        self.node_sync.node_traits = rp_rules.node_traits(self.node_sync.ironic, rules,
                                                          self.node_sync.tenancy)

    def healthy(self):
        return self.health.healthy()

    def stop(self, signum=None, frame=None):
        LOG.info("stopping (signal %s)", signum)
        rp_log.sd_notify("STOPPING=1")
        self.stopping.set()
        self.resync_now.set()

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
            self.resync_now.set()  # a resync puts every node in step with the new rules
        return True

    # -- the loop --------------------------------------------------------------
    def pass_due(self):
        """How old the last completed pass may be before /healthz fails: two of this
        agent's cycles (its jittered interval, and a member's longest wait for its
        slice)."""
        reconcile = self.conf.reconcile
        waits = (self.sharing.wait_max_seconds()
                 if self.sharing is not None and not self.sharing.is_lister() else 0)
        return 2 * (reconcile.interval * (1 + reconcile.jitter) + waits)

    def next_wait(self):
        interval, jitter = self.conf.reconcile.interval, self.conf.reconcile.jitter
        return interval * random.uniform(1 - jitter, 1 + jitter)

    def wait_supervising(self, seconds):
        """Wait for the next pass (or a resync due now), restarting any supervised
        thread that dies meanwhile: a dead thread costs one heartbeat, not a pass."""
        deadline = time.monotonic() + seconds
        while not self.resync_now.is_set():
            self.supervise()
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.resync_now.wait(min(left, self.conf.coordination.heartbeat))

    def supervise(self):
        """Start dead threads again (the membership, fencing and queue workers)."""
        died = self.threads.check(extra=self.queue.revive())
        for name, _ in died:
            self.metrics.threads_restarted.labels(name.rstrip("0123456789-")).inc()
        if died:
            self.resync_now.set()  # a resync requeues whatever a dead thread held

    def cycle(self):
        """One turn of the loop: a pass (unless fenced), then the wait for the next."""
        self.resync_now.clear()
        done = True
        if not self.ownership.fenced:
            listing = self.slices.listing_for_pass(self.sharing)
            if self.stopping.is_set():
                return  # stopping never starts a listing
            started = time.monotonic()
            self.health.began()
            with self.metrics.reconciling.track_inprogress():
                try:
                    # On the lister's slice, or on this agent's own listings, teed to
                    # the members when it lists for them.
                    tee = self.sharing.tee() if self.sharing and listing is None else None
                    done = self.resync.run(listing, tee)
                except Exception:  # a bug: this pass is lost, the agent is not
                    LOG.exception("reconcile pass failed")
                    done = False
            if done:
                self.threads.recovered(started)
                self.health.passed()
        # A pass that could not run (an outage, a refused permission, Keystone or
        # the catalog misconfigured) is tried again within [agent] retry_backoff_max, so
        # the agent recovers by itself soon after the cause is fixed.  A member
        # waits past its interval for the lister's slice, which wakes it.
        backoff_max = self.conf.agent.retry_backoff_max
        wait = self.next_wait() if done else min(self.next_wait(), backoff_max)
        if done and self.sharing is not None and not self.sharing.is_lister():
            wait += self.sharing.wait_seconds()
        self.wait_supervising(wait)

    # -- start and stop --------------------------------------------------------
    def start_listener(self):
        if not rp_conf.bus_url(self.conf):
            LOG.warning("no transport_url ([DEFAULT], or [notifications] for this agent): "
                        "reconcile loop only, every %s s", self.conf.reconcile.interval)
            return
        from rp_reporter.sync import events  # only now: oslo.messaging is heavy

        endpoint = events.NotificationEndpoint(self.controller.on_notification,
                                               self.controller.on_bad_notification)
        self.listener = events.listener(self.conf, endpoint)
        LOG.info("listening for Ironic notifications on topic %s",
                 self.conf.notifications.topic)
        if self.conf.reconcile.share_listing and not self.conf.reconcile.shared_listing_keys:
            LOG.warning("[reconcile] share_listing is on but shared_listing_keys is empty: "
                        "no listing is shared, every agent lists by itself")
        elif self.conf.reconcile.share_listing:
            from rp_reporter.agent import listing_bus  # oslo.messaging, as above

            self.sharing = listing_bus.Sharing(
                self.conf, self.ownership, lambda: self.node_sync.extra_fields,
                arrived=self.resync_now.set,
                dropped=lambda kind, reason: self.metrics.listing_dropped.labels(kind).inc(),
                cast_failed=self.metrics.listing_casts_failed.inc,
                deployment=rp_state.identity_hash(wiring.identity(self.conf))).start()
            self.health.casts = self.sharing.casts

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
            self.leaving, self.controller.on_members_changed))
        # The first pass wants the whole ring; a backend that does not answer within a
        # lease is joined later (the agent writes nothing until then).
        self.ownership.joined.wait(self.conf.coordination.lease)
        # The first pass on the ring the agents started together end up with, not on
        # one seen while they joined (a few heartbeats in a group; a fixed ring: none).
        self.ownership.settle(SETTLE_HEARTBEATS * self.conf.coordination.heartbeat,
                              self.conf.coordination.lease, self.stopping)
        self.threads.start("fencing", lambda: self.ownership.watch_fencing(
            self.stopping, self.queue.pause, self.resync_now.set))
        self.controller.start()
        self.start_listener()
        self.health.ready.set()
        rp_log.sd_notify(f"READY=1\nSTATUS=serving /healthz; listener bound\nMAINPID={os.getpid()}")
        threading.Thread(target=self.log_preflight, name="preflight", daemon=True).start()
        while not self.stopping.is_set():
            self.cycle()
        self.shut_down()
        LOG.info("agent %s stopped", self.conf.host)
        return 0

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
