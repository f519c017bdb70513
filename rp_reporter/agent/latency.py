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

"""The fast path's clock: from Ironic's notification to Placement's answer, per node.

The agent notes each accepted notification's send time; when the node's sync
succeeds, the time since the earliest notification not yet synced goes to the
``rp_reporter_event_to_write_seconds`` histogram, and a sync slower than
SLOW_FAST_PATH is logged with where its time went.
"""

import logging
import threading
import time

LOG = logging.getLogger("rp_reporter.agent")
# A notification-driven sync slower than this, from Ironic's notification to Placement's
# answer, is logged with where its time went (the fast path's target is 300 ms at p99).
SLOW_FAST_PATH = 0.5


class FastPathClock:
    def __init__(self, histogram):
        self._histogram = histogram
        # uuid -> (sent, arrived here) of the earliest notification not yet synced
        self._events = {}
        self._lock = threading.Lock()

    def noted(self, uuid, sent_at):
        """A notification for ``uuid`` sent at ``sent_at`` (wall clock, None: now)."""
        sent_at = sent_at or time.time()
        with self._lock:
            earliest, arrived = self._events.get(uuid, (sent_at, time.time()))
            self._events[uuid] = (min(sent_at, earliest), arrived)

    def synced(self, uuid):
        """``uuid``'s sync succeeded: its notifications' time to Placement is observed
        (only notification-driven syncs count as event-to-write)."""
        with self._lock:
            sent_at, _ = self._events.pop(uuid, (None, None))
        if sent_at is not None:
            self._histogram.observe(max(0.0, time.time() - sent_at))

    def log_if_slow(self, uuid, started, done):
        """A notification-driven sync that took longer than SLOW_FAST_PATH: one line
        saying where the time went (the bus, this agent's queue, Ironic, Placement)."""
        with self._lock:
            sent_at, received_at = self._events.get(uuid, (None, None))
        now = time.time()
        if sent_at is None or now - sent_at < SLOW_FAST_PATH:
            return
        LOG.info("node %s: fast path took %.2f s from Ironic's notification to Placement's "
                 "answer: arrived after %.2f s, queued %.2f s, Ironic read %.2f s, Placement "
                 "%.2f s in %d attempt(s)", uuid, now - sent_at, received_at - sent_at,
                 max(0.0, started - received_at), done.read_seconds,
                 now - started - done.read_seconds, done.result.attempts)
