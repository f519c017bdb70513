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

"""One log line when a dependency goes away and one when it is back, however
many calls fail in between (an outage should not flood the logs).

What the line says depends on the kind of failure (``errors``): an outage is
retried until the service returns; a refused permission or a configuration
problem is named as such, since no retry fixes it (the agent tries again at
its next pass, so it recovers by itself once someone fixes the cause).
"""

import logging
import threading
import time

from rp_reporter import errors

LOG = logging.getLogger("rp_reporter")

CONSEQUENCES = {
    errors.UNAVAILABLE: "unavailable, retrying until it returns",
    errors.DENIED: "refuses the reporter (permission): no retry fixes this; trying again "
                   "each pass",
    errors.MISCONFIGURED: "cannot be used as configured: fix the configuration; trying again "
                          "each pass",
}


class Outage:
    def __init__(self, name):
        self.name = name
        self.down_since = None
        self.error = None  # the failure that took it down, for /healthz
        self._lock = threading.Lock()

    def failed(self, error, consequence=None):
        """Note a failed call; the first failure (or a new kind of failure) is logged
        with ``consequence``, or with what the kind of failure means."""
        kind = getattr(error, "kind", errors.UNAVAILABLE)
        with self._lock:
            # Errors without a kind (a backend client's own) count as outages, before
            # and now alike, or each would be logged as a new kind of failure.
            changed = (self.error is None
                       or getattr(self.error, "kind", errors.UNAVAILABLE) != kind)
            if self.down_since is None:
                self.down_since = time.monotonic()
            self.error = error
            if changed:
                LOG.error("%s %s: %s", self.name, consequence or
                          CONSEQUENCES.get(kind, CONSEQUENCES[errors.UNAVAILABLE]), error)

    def ok(self):
        with self._lock:
            if self.down_since is not None:
                LOG.warning("%s available again after %.1f s", self.name,
                            time.monotonic() - self.down_since)
                self.down_since = self.error = None
