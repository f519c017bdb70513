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

"""What ``/healthz`` answers, and the agent's long-lived threads kept alive.

``Health.healthy()`` is the one answer, in words, that ``/healthz`` serves and
the ``rp_reporter_healthy`` gauge exports: starting, fenced (or not a member
yet), a dependency down or refusing, a thread that died, the deletion guard
refusing, or ok.

A thread that ends while the agent runs is a bug or an unforeseen failure;
either way the agent must not go on half-alive (renewals stopped, a worker
gone) while the process looks fine to systemd.  ``check()`` starts every
dead thread again, logs one line naming it and why it ended, and keeps the
death on record until ``recovered()`` (the agent calls it once a reconcile
pass that began after the death has completed), so ``/healthz`` says so.
"""

import logging
import threading
import time

LOG = logging.getLogger(__name__)


class Health:
    def __init__(self, metrics, ownership, outages, trait_writes, threads, pass_due=None,
                 clock=time.monotonic):
        self.ownership = ownership
        # () -> seconds: a completed pass older than this is a stalled loop.
        self.pass_due = pass_due
        self.clock = clock
        self.last_pass = None  # when the last pass completed (or, until one has, ready)
        self.running_since = None  # when the pass under way began
        self.casts = None  # the shared listing's casts (an Outage) on a lister
        self.outages = outages  # {section: Outage}
        self.trait_writes = trait_writes  # Outage of the derived-trait writes
        self.threads = threads  # Supervisor
        self.ready = threading.Event()  # listener bound: events from now on are seen
        self.stopping = threads.stopping
        self.deletion_refused = None  # the deletion guard's line while it refuses
        metrics.healthy.set_function(lambda: float(self.healthy()[0]))
        metrics.fenced.set_function(lambda: float(bool(ownership.fenced)))
        for section, outage in outages.items():
            metrics.dependency_up.labels(section).set_function(
                lambda outage=outage: float(outage.down_since is None))

    def healthy(self):
        """(True, "ok") or (False, why), for /healthz."""
        if self.stopping.is_set():
            return False, "stopping"
        if not self.ready.is_set():
            return False, "starting"
        stalled = self.stalled()
        if stalled:
            return False, stalled
        if self.ownership.fenced:
            down = self.ownership.not_a_member_yet()
            if down is not None:
                return False, f"not a member yet: coordination backend: {down}"
            return False, "fenced: membership not renewed"
        thread_problem = self.threads.problem()
        if thread_problem:
            return False, thread_problem
        for outage in (*self.outages.values(), self.trait_writes, self.casts):
            if outage is not None and outage.down_since is not None:
                return False, f"{outage.name}: {outage.error}"
        if self.deletion_refused:
            return False, f"deletion refused: {self.deletion_refused}"
        return True, "ok"

    def stalled(self):
        """Why the reconcile loop counts as stalled (no pass completed within its due
        time, and none began within it either), or None."""
        now = self.clock()
        if self.last_pass is None:
            self.last_pass = now
        if self.pass_due is None or self.ownership.fenced:
            return None
        due = self.pass_due()
        if now - self.last_pass <= due:
            return None
        if self.running_since is not None and now - self.running_since <= due:
            return None  # a long pass, not a stalled one
        return f"no reconcile pass completed for {now - self.last_pass:.0f} s (due {due:.0f} s)"

    def began(self):
        """A reconcile pass began."""
        self.running_since = self.clock()

    def passed(self):
        """A reconcile pass ended (it completed, or could not run: a dependency's
        outage then says why on its own)."""
        self.running_since = None
        self.last_pass = self.clock()


class Supervisor:
    def __init__(self, stopping):
        self.stopping = stopping  # threading.Event: threads end on purpose once set
        self._targets = {}  # name -> callable
        self._threads = {}  # name -> Thread
        self._why = {}  # name -> why its last thread ended
        self._lock = threading.Lock()
        self.deaths = []  # [(monotonic time, name, why)] not yet recovered from

    def start(self, name, target):
        with self._lock:
            self._targets[name] = target
            self._spawn(name)

    def _spawn(self, name):
        target = self._targets[name]

        def run():
            try:
                target()
            except BaseException as e:
                self._why[name] = f"{type(e).__name__}: {e}"
                LOG.exception("thread %s died", name)
                raise
            if not self.stopping.is_set():
                self._why[name] = "returned while the agent runs"

        thread = self._threads[name] = threading.Thread(target=run, name=name, daemon=True)
        thread.start()

    def join(self, name, timeout):
        """Wait up to ``timeout`` s for thread ``name`` to end (it was told to)."""
        with self._lock:
            thread = self._threads.get(name)
        if thread is not None:
            thread.join(timeout)

    def check(self, extra=()):
        """Start every dead thread again; ``extra``: [(name, why)] that others (the
        work queue) already started again.  Returns what died since the last check."""
        died = list(extra)
        if self.stopping.is_set():
            return died
        with self._lock:
            for name, thread in self._threads.items():
                if not thread.is_alive():
                    died.append((name, self._why.pop(name, "ended")))
                    self._spawn(name)
                    LOG.error("thread %s died (%s); started again", name, died[-1][1])
        now = time.monotonic()
        self.deaths.extend((now, name, why) for name, why in died)
        return died

    def recovered(self, since):
        """A pass that began at ``since`` completed: deaths before it are repaired
        (that pass requeued whatever a dead thread held)."""
        self.deaths = [d for d in self.deaths if d[0] >= since]

    def problem(self):
        """One line for /healthz while a death is not yet repaired, else None."""
        if not self.deaths:
            return None
        _, name, why = self.deaths[-1]
        more = f" (and {len(self.deaths) - 1} more)" if len(self.deaths) > 1 else ""
        return (f"thread {name} died ({why}){more}; started again, healthy once a "
                f"reconcile pass completes")
