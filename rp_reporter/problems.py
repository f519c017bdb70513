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

"""One warning per node and kind of problem, until that problem clears.

A node that cannot be offered (no resource class, refused traits, derived
traits Ironic will not take) would otherwise be logged on every pass.  The
key is the node and the kind of problem, not the message's text: a service's
message carries a per-call request id, so no two are alike.  What is
remembered is bounded by the problems the last pass still saw: ``end_pass``
forgets every problem that pass did not note again, so a problem that clears
and comes back is logged again, and a fleet's log stays one line per problem.
A node the pass leaves to another sync (the agent's queue has it in hand) is not
judged by the pass, so ``keep`` carries its problems over: only a sync that looked
at the node may clear them.
"""

import logging
import threading


class ProblemLog:
    def __init__(self, logger=None):
        self._log = logger or logging.getLogger("rp_reporter")
        self._noted = {}  # (uuid, kind) -> the pass that last noted it
        self._pass = 0
        self._lock = threading.Lock()

    def note(self, uuid, message, kind=None):
        """Warn ``node <uuid>: <message>`` unless this node's problem of this kind (by
        default: this message) was noted and has not cleared since.  True if logged."""
        key = (uuid, kind or message)
        with self._lock:
            new = key not in self._noted
            self._noted[key] = self._pass
        if new:
            self._log.warning("node %s: %s", uuid, message)
        return new

    def replace(self, uuid, messages):
        """The node's problems are exactly ``messages`` now: new ones are logged, and
        the node's others forgotten (for callers without passes: the nova driver)."""
        with self._lock:
            for key in [k for k in self._noted if k[0] == uuid and k[1] not in messages]:
                del self._noted[key]
        for message in messages:
            self.note(uuid, message)

    def keep(self, uuid):
        """This pass leaves ``uuid`` to another sync: its problems stand as noted (a
        pass that forgot them would have the other sync log them again)."""
        with self._lock:
            for key in self._noted:
                if key[0] == uuid:
                    self._noted[key] = self._pass

    def start_pass(self):
        with self._lock:
            self._pass += 1

    def end_pass(self):
        """Forget the problems this pass did not note again (they cleared)."""
        with self._lock:
            self._noted = {k: p for k, p in self._noted.items() if p >= self._pass}

    def __len__(self):
        return len(self._noted)
