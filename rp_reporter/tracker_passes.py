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

"""Which nodes nova's resource-tracker periodic goes over.  Pure.

nova's ``update_available_resource`` periodic goes over every node a compute service
manages, each under the resource tracker's lock: at 1,000 nodes per service that is
about a minute of nova's work every interval
(doc/source/contributor/performance.md, "nova at fleet size"), while for a node
nothing happened to it only re-reads what it wrote last time.
Where rp_reporter's agents keep each node's provider right, the driver can give that
periodic only the nodes that need nova's own look, with ``[rp_reporter]
full_pass_every`` N above 1.  A node is due:

* when nova has not looked at it since this service took it (every node at the
  service's start, each node a takeover or a ring change brings here, a node back after
  an absence from this service's nodes);
* when the fields nova reads of it in Ironic changed since nova's last look (an instance
  arriving or going, a state, maintenance, a class, properties, traits);
* after a change only nova knows of (``touched``: a build on it, a server destroyed on
  it), at the next two looks;
* and once nova has not looked at it for N - 1/2 update intervals: every node at least
  once in N periodics keeps nova's own repairs (stale allocations, its traits, the
  compute node record) going at a slower pace.  Half an interval short of N, so that a
  look made during one periodic falls due N periodics later, however far into its
  periodic it was made (up to half an interval) and however the periodics' starts vary.
  Where the fleet is listed whole only now and then (``whole_listed``), such a node is
  due only once a whole listing that started after nova's look has been taken: only
  that listing sees a node deleted from Ironic, and nova's look at a deleted node would
  write its provider again.

Before nova's periodic looks at a node, a listing of Ironic made for that periodic
must have held it (``unseen`` says which did not): a node deleted or moved to another
shard after the last whole listing read it is still in the fleet kept, and only the
nodes written since are listed at each refresh.  The driver checks the others against
Ironic first.

"nova's look" is the resource tracker's ``get_available_resource(node)``, made once per
node it goes over: ``looked_at`` records it, with the node's fingerprint (the values of
the fields nova reads, hashable) and the time on a monotonic clock.  Asking which nodes
are due (``due``) changes nothing: nova asks the same question outside its periodic
(a build's "first node of this host").

N = 1 is nova's behaviour: every node, every periodic.
"""

import math

LOOKS_AFTER_A_TOUCH = 2
"""nova writes a change only it knows of at the node's next update, and may make it
after the driver's part is over: a failed build is counted (``failed_builds``, read by
the BuildFailureWeigher) once nova's cleanup of it is done.  A periodic may look at the
node in between; the one after writes it."""


class TrackerPasses:
    """nova's looks at the nodes of one compute service, and which nodes are due."""

    def __init__(self, full_pass_every, interval_s=60.0):
        self.full_pass_every = max(1, full_pass_every)
        self.interval_s = interval_s
        self._looks = {}  # uuid: (its fingerprint, the time) at nova's last look
        self._whole_at = math.inf  # the start of the fleet's latest whole listing
        self._owed = {}  # uuid: looks still owed to a change only nova knows of
        self._disabled = None  # the service's disabled flag at the last periodic

    @property
    def enabled(self):
        return self.full_pass_every > 1

    @property
    def longest_s(self):
        """How long a node goes without nova's look before it is due."""
        return (self.full_pass_every - 0.5) * self.interval_s

    def due(self, managed, now):
        """The nodes of ``managed`` ({uuid: fingerprint}) due at a periodic at ``now``,
        in their order."""
        return [uuid for uuid, seen in managed.items() if self._is_due(uuid, seen, now)]

    def _is_due(self, uuid, seen, now):
        look = self._looks.get(uuid)
        return (not self.enabled or look is None or look[0] != seen or uuid in self._owed
                or self._aged(look, now))

    def _aged(self, look, now):
        return now - look[1] >= self.longest_s and look[1] < self._whole_at

    def aged(self, managed, now):
        """How many of ``managed`` are due only for nova's long absence."""
        return sum(1 for uuid, seen in managed.items()
                   if uuid not in self._owed and self._looks.get(uuid, (None,))[0] == seen
                   and self._aged(self._looks[uuid], now))

    def whole_listed(self, started):
        """The fleet the nodes come from is now a whole listing's that started at
        ``started`` (the same clock as the looks'), and what changed since."""
        self._whole_at = started

    @staticmethod
    def unseen(uuids, seen, since):
        """Of ``uuids``, those no listing of Ironic held at or after ``since`` (``seen``:
        {uuid: when a listing last held it}), in their order."""
        return [uuid for uuid in uuids if seen.get(uuid, -math.inf) < since]

    def least_recent(self, managed):
        """The node of ``managed`` nova looked at least recently (never: first)."""
        return min(managed, key=lambda uuid: self._looks.get(uuid, (None, -math.inf))[1],
                   default=None)

    def next_aged_in(self, managed, now):
        """Periodics from now until a node of ``managed`` not due now is due for nova's
        long absence (None: no such node)."""
        ages = [now - self._looks[uuid][1] for uuid in managed
                if uuid in self._looks and not self._is_due(uuid, managed[uuid], now)]
        if not ages:
            return None
        return max(1, math.ceil((self.longest_s - max(ages)) / self.interval_s))

    def looked_at(self, uuid, seen, now):
        """nova's resource tracker looked at ``uuid`` at ``now``; ``seen``: its
        fingerprint then."""
        self._looks[uuid] = (seen, now)
        owed = self._owed.pop(uuid, 0) - 1
        if owed > 0:
            self._owed[uuid] = owed

    def touched(self, uuids):
        """A change only nova knows of happened to ``uuids``: due at its next looks."""
        for uuid in uuids:
            self._owed[uuid] = LOOKS_AFTER_A_TOUCH

    def service_status(self, disabled):
        """The compute service's disabled flag as nova's periodic starts (None: not
        read).  nova's resource tracker writes it into each node's provider at its look
        (``COMPUTE_STATUS_DISABLED``): when it changed since the last periodic, every
        node is due, or one not looked at would keep the old trait until the full pass
        (nova's enable writes the traits itself, but a periodic under way then wrote the
        old one back: a free node not offered for 101.7 s in the upgrade's run).
        Whether every node was made due."""
        changed = None not in (disabled, self._disabled) and disabled != self._disabled
        if disabled is not None:
            self._disabled = disabled
        if changed:
            self.touched(list(self._looks))
        return changed

    def forget(self, released):
        """Nodes this service stopped managing, or whose update nova reports failed: due
        again, as nova's last look at them may not hold (another service's resource
        tracker may have taken their records meanwhile)."""
        for uuid in released:
            self._looks.pop(uuid, None)

    def keep_only(self, managed):
        """Forget the nodes not in ``managed`` (this service's nodes now): due again if
        they come back."""
        for uuid in set(self._looks) - set(managed):
            del self._looks[uuid]
        for uuid in set(self._owed) - set(managed):
            del self._owed[uuid]
