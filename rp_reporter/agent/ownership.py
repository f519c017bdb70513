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

"""Which nodes this agent owns, and whether it may write at all.

Membership (``rp_reporter.membership``: a tooz group, static peers, or alone)
is renewed every heartbeat; the ring over its live members says which nodes
are this agent's.  A member that cannot renew is fenced: it writes nothing,
from the fencing deadline on, until it is a member again, so two live writers
for one node last no longer than one lease.  ``check_lease`` and
``check_owner`` are the guards the clients call before every write.

Notifications about nodes another agent owned are remembered for a while: when
that agent dies and its nodes become this one's, they are synced first.
"""

import collections
import logging
import threading
import time

from rp_reporter import errors
from rp_reporter import membership as rp_membership
from rp_reporter import wiring

LOG = logging.getLogger("rp_reporter.agent")
# Notifications remembered for nodes another agent owned (oldest dropped first).
RECENT_EVENTS_MAX = 10_000


class Ownership:
    def __init__(self, conf, membership=None):
        self.conf = conf
        self.membership = membership or rp_membership.from_conf(conf)
        self.ring = self.ring_of({conf.host})
        self.joined = threading.Event()  # set once a member of the ring, for good
        self.ring_changed = time.monotonic()  # when the ring last changed
        self._unowned_events = collections.OrderedDict()  # uuid -> when, another's node
        self._lock = threading.Lock()

    def ring_of(self, members):
        return wiring.ring(self.conf, members)

    @property
    def fenced(self):
        return self.membership.fenced

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

    def not_a_member_yet(self):
        """Why this agent has never been a member (the backend's failure, or no answer
        yet), else None."""
        if self.joined.is_set():
            return None
        return self.membership.down or "no answer yet"

    # -- membership and fencing (each loop is a supervised thread) ----------
    def renew(self, stopping, on_change):
        """Join, then renew membership every heartbeat; on a change of members, rebuild
        the ring and call ``on_change(recently changed nodes now owned)``.

        The first join happens here, not before the agent serves /healthz: a backend
        that is down can hold one call for as long as its client retries (a minute,
        for tooz's redis driver), and until it answers the agent is fenced anyway.
        """
        self.membership.start()
        while not stopping.is_set():
            members = self.membership.tick()
            if members and members != self.ring.members:
                LOG.info("ring members now %s", sorted(members))
                self.ring = self.ring_of(members)
                self.ring_changed = time.monotonic()
                on_change(self.take_over_recent_events())
            if members and not self.joined.is_set():
                # The first look counts as a change (``settle`` waits from it), and is
                # taken before the agent's first pass may start: on the ring of
                # {itself} an agent started beside others listed the whole fleet.
                self.ring_changed = time.monotonic()
                self.joined.set()
            stopping.wait(self.conf.coordination.heartbeat)

    def settle(self, quiet, limit, stopping):
        """Return once the ring has held for ``quiet`` seconds, or after ``limit``.

        Agents started together join one by one within a second or two; a first pass
        on a ring seen on the way is wasted at a large fleet: the lister cut its
        listing for members that were not the final ones, a member missing from that
        ring listed by itself, and a member that was the lister of a passing ring
        listed too (seen at 10^5 nodes: four listings of the same Ironic at once)."""
        if not self.membership.changes_at_run_time:
            return  # a fixed ring: the first look is the final one
        deadline = time.monotonic() + limit
        while not stopping.is_set():
            now = time.monotonic()
            held = now - self.ring_changed
            if held >= quiet or now >= deadline:
                return
            stopping.wait(min(quiet - held, deadline - now))

    def watch_fencing(self, stopping, pause, resync):
        """``pause(True)`` while fenced; ``pause(False)`` and ``resync()`` once renewed,
        since what arrived meanwhile was dropped (``owns`` said no).

        Apart from the renewals, because one renewal can block through a whole
        outage; ``lapses`` shows a lapse that began and ended inside one renewal.
        """
        was_fenced, lapses = False, self.membership.lapses
        while not stopping.wait(self.conf.coordination.heartbeat):
            renewed_after_lapse = self.membership.lapses != lapses
            lapses = self.membership.lapses
            fenced = self.membership.fenced
            if fenced and not was_fenced:
                pause(True)
                if self.joined.is_set():
                    LOG.warning("fenced: membership not renewed in time, writes stopped")
                else:
                    LOG.warning("not a member yet: writes wait for the coordination backend")
            elif not fenced and (was_fenced or renewed_after_lapse):
                pause(False)
                LOG.warning("unfenced: membership renewed, writes resume; resyncing for "
                            "what was dropped while fenced")
                resync()
            was_fenced = fenced

    # -- takeover -----------------------------------------------------------
    def note_unowned(self, uuid):
        """A notification named a node another agent owns (for a takeover)."""
        with self._lock:
            self._unowned_events[uuid] = time.monotonic()
            self._unowned_events.move_to_end(uuid)
            while len(self._unowned_events) > RECENT_EVENTS_MAX:
                self._unowned_events.popitem(last=False)

    def take_over_recent_events(self):
        """Nodes named by notifications while another agent owned them, within the last
        two leases, that this agent owns now: their owner may have died before syncing
        them, so they go ahead of the resync (a takeover then costs the detection and
        one sync, not a place in the resync of every newly owned node)."""
        horizon = time.monotonic() - 2 * self.conf.coordination.lease
        with self._lock:
            recent = [u for u, seen in self._unowned_events.items() if seen >= horizon]
            self._unowned_events.clear()
        taken = [uuid for uuid in recent if self.owns(uuid)]
        if taken:
            LOG.info("%d recently changed nodes are now this agent's: synced first", len(taken))
        return taken
