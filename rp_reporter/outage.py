"""One log line when a dependency goes away and one when it is back, however
many calls fail in between (an outage should not flood the logs)."""

import logging
import threading
import time

LOG = logging.getLogger("rp_reporter")


class Outage:
    def __init__(self, name):
        self.name = name
        self.down_since = None
        self._lock = threading.Lock()

    def failed(self, error, consequence="retrying until it returns"):
        with self._lock:
            if self.down_since is None:
                self.down_since = time.monotonic()
                LOG.error("%s unavailable, %s: %s", self.name, consequence, error)

    def ok(self):
        with self._lock:
            if self.down_since is not None:
                LOG.warning("%s available again after %.1f s", self.name,
                            time.monotonic() - self.down_since)
                self.down_since = None
