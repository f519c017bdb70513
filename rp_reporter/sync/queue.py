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

"""A de-duplicating work queue of node uuids with a bounded worker pool.

The controller pattern: events and the periodic resync only say *which* node
to look at; one sync function makes Placement match it.  A key queued many
times while waiting is synced once; a key queued while its sync runs is synced
again afterwards (the newer state is never skipped); a failed sync is retried
with exponential backoff until it succeeds or ``wanted(key)`` says no (the
node is no longer owned).  A restart loses nothing: reconcile rebuilds it.

A worker survives whatever one sync does: an exception from the sync, the
retry bookkeeping or ``on_done`` costs that attempt (the key is retried), and a
worker thread that dies anyway is started again by ``revive()`` (the agent calls
it every heartbeat and says so on ``/healthz``).

Two lanes: a key added ``urgent`` (a notification: someone just changed that
node) goes ahead of routine keys (a resync's), so a restarted agent's cold
resync of every node it owns does not hold up the changes made meanwhile.
"""

import collections
import heapq
import logging
import random
import threading
import time

LOG = logging.getLogger(__name__)
URGENT, ROUTINE = 0, 1  # lanes, taken from in this order
# The backoff doubles per failure up to its cap; beyond this many doublings it is
# at the cap for any sane base, and 2.0 ** 1024 would overflow a float.
MAX_DOUBLINGS = 60


def backoff(failures, base, cap):
    """The delay before retry number ``failures`` (1, 2, ...): doubling, capped."""
    return min(cap, base * 2.0 ** min(max(failures - 1, 0), MAX_DOUBLINGS))


class WorkQueue:
    """The keys and their retries; ``start(sync, on_done)`` sets its workers to work.

    The sync function is the workers', not the queue's: a queue can be built (and
    asked ``has(key)``) before the sync it feeds, which may need to ask it."""

    def __init__(self, workers=8, wanted=None, backoff_base=0.2, backoff_max=30.0):
        self._sync = None  # key -> False to retry it with backoff; given to start()
        self._wanted = wanted or (lambda key: True)
        self._on_done = None  # (key, ok) -> None, for metrics; given to start()
        self._backoff_base, self._backoff_max = backoff_base, backoff_max
        self._cond = threading.Condition()
        self._lanes = (collections.deque(), collections.deque())  # keys ready, oldest first
        self._ready_in = {}  # key -> its lane (an entry for it in the other lane is stale)
        self._queued = set()  # every key waiting, ready, delayed or to run again
        self._delayed = []  # heap of (due, key) for retries
        self._failures = {}  # key -> consecutive failures
        self._running = set()
        self._dirty = {}  # key -> lane: queued while running, run again afterwards
        self._stopping = False
        self._paused = False
        self._threads = [self._worker(f"sync-{i}") for i in range(workers)]
        self._deaths = {}  # worker name -> why it ended, for revive()

    def _worker(self, name):
        return threading.Thread(target=self._work, name=name, daemon=True)

    def start(self, sync, on_done=None):
        """Workers call ``sync(key)`` for each key (False: retry it with backoff), then
        ``on_done(key, ok)``."""
        self._sync, self._on_done = sync, on_done
        for t in self._threads:
            t.start()
        return self

    def revive(self):
        """Start again every worker thread that died; returns [(name, why)]."""
        revived = []
        with self._cond:
            if self._stopping:
                return revived
            for i, thread in enumerate(self._threads):
                if thread.ident is not None and not thread.is_alive():
                    why = self._deaths.pop(thread.name, "ended")
                    self._threads[i] = self._worker(thread.name)
                    self._threads[i].start()
                    revived.append((thread.name, why))
        for name, why in revived:
            LOG.error("work queue thread %s died (%s); started again", name, why)
        return revived

    # -- producers ------------------------------------------------------
    def add(self, key, urgent=False):
        lane = URGENT if urgent else ROUTINE
        with self._cond:
            if key in self._running:
                self._dirty[key] = min(lane, self._dirty.get(key, lane))
                self._queued.add(key)
                return
            if key in self._queued:
                # Ready in the routine lane and now urgent: move it up.  (A key
                # delayed for a retry waits out its backoff.)
                if lane < self._ready_in.get(key, URGENT):
                    self._make_ready(key, lane)
                return
            self._queued.add(key)
            self._make_ready(key, lane)

    def depth(self):
        """Keys waiting to be synced (ready, delayed for a retry, or due again)."""
        with self._cond:
            return len(self._queued)

    def has(self, key):
        """The key is waiting or being synced."""
        with self._cond:
            return key in self._queued or key in self._running

    def idle(self):
        with self._cond:
            return not (self._queued or self._delayed or self._running)

    def pause(self, paused=True):
        """Fencing: while paused, workers take nothing (writes stop)."""
        with self._cond:
            self._paused = paused
            self._cond.notify_all()

    def stop(self, timeout=10):
        """Let in-flight syncs finish; drop the rest (reconcile rebuilds it)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0, deadline - time.monotonic()))

    # -- workers --------------------------------------------------------
    def _make_ready(self, key, lane):
        self._ready_in[key] = lane
        self._lanes[lane].append(key)
        self._cond.notify()

    def _pop_ready(self):
        for lane, keys in enumerate(self._lanes):
            while keys:
                key = keys.popleft()
                if self._ready_in.get(key) == lane:
                    del self._ready_in[key]
                    return key
        return None

    def _promote_due(self, now):
        while self._delayed and self._delayed[0][0] <= now:
            _, key = heapq.heappop(self._delayed)
            if key not in self._ready_in and key not in self._running:
                self._make_ready(key, ROUTINE)

    def _take(self):
        with self._cond:
            while True:
                if self._stopping:
                    return None
                self._promote_due(time.monotonic())
                key = None if self._paused else self._pop_ready()
                if key is not None:
                    self._running.add(key)
                    return key
                timeout = None
                if self._delayed:
                    timeout = max(0.0, self._delayed[0][0] - time.monotonic())
                self._cond.wait(timeout if timeout is not None else 1.0)

    def _finish(self, key, ok):
        with self._cond:
            self._running.discard(key)
            if ok:
                self._failures.pop(key, None)
            if key in self._dirty:  # changed again while we synced: go again now
                self._make_ready(key, self._dirty.pop(key))
            elif ok:
                self._queued.discard(key)
            elif self._wanted(key):
                failures = self._failures[key] = self._failures.get(key, 0) + 1
                delay = backoff(failures, self._backoff_base, self._backoff_max)
                heapq.heappush(self._delayed,
                               (time.monotonic() + random.uniform(delay / 2, delay), key))
                self._cond.notify()
            else:
                self._queued.discard(key)
                self._failures.pop(key, None)

    def _release(self, key):
        """After a failure in the bookkeeping itself: the key leaves the running set
        and is retried after the longest backoff (never stuck as queued)."""
        with self._cond:
            self._running.discard(key)
            self._dirty.pop(key, None)
            self._queued.add(key)
            heapq.heappush(self._delayed, (time.monotonic() + self._backoff_max, key))
            self._cond.notify()

    def _work(self):
        try:
            while True:
                key = self._take()
                if key is None:
                    return
                self._work_on(key)
        except BaseException as e:  # the thread ends here; revive() starts another
            self._deaths[threading.current_thread().name] = f"{type(e).__name__}: {e}"
            raise

    def _work_on(self, key):
        ok = False
        try:
            # A key no longer wanted (not owned) is done: nothing to retry.
            ok = not self._wanted(key) or self._sync(key) is not False
        except Exception as e:
            LOG.warning("node %s: sync failed, will retry: %s", key, e)
        except BaseException:
            self._release(key)
            raise
        try:
            self._finish(key, ok)
        except Exception:
            LOG.exception("node %s: work queue bookkeeping failed; retried later", key)
            self._release(key)
        if self._on_done:
            try:
                self._on_done(key, ok)
            except Exception:
                LOG.exception("node %s: after-sync callback failed", key)
