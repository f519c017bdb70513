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

"""Who is alive: this agent's membership in a tooz group, and fencing.

Any tooz backend works (redis://, etcd3+http://, zookeeper://, kubernetes://,
file://DIR on one machine); ``[ring] peer_list`` is the static alternative
with no backend, and with neither an agent is alone.  All three answer the
same two questions, so the agent never knows which one runs.

Fencing: the backend drops a member whose heartbeats stop for ``lease``
seconds, and the others then take its nodes.  A member that cannot renew
stops writing before that moment (``lease - heartbeat`` after its last good
renewal), so two live writers for one node last no longer than one lease.
A renewal can block for as long as the backend's client retries (tooz's redis
driver: tens of seconds while Redis is down), so fencing is a deadline read
from the clock, not a state a renewal sets; and ``lapses`` counts renewals
that came after the deadline, so a lapse is seen even when one blocked
renewal spanned it, and renewals that found this member gone from the
backend's group (the backend's word: a VM paused by its hypervisor may find
its own clock stood still through the pause).
"""

import contextlib
import logging
import math
import os
import threading
import time
import urllib.parse

from tooz import coordination

from rp_reporter.outage import Outage

LOG = logging.getLogger(__name__)


class Alone:
    """No backend, no peers: this agent owns every node."""

    lapses = 0  # never fenced
    down = None  # no backend to fail
    # Whether a member missing from members() is known dead (a lease ran out), which
    # is what re-homing a dead member's work needs; a static list knows nobody's state.
    tracks_liveness = False
    # Members never come or go while it runs: the ring seen first is the ring for good,
    # so nothing is worth waiting for before the first pass.
    changes_at_run_time = False

    def __init__(self, member_id):
        self.member_id = member_id

    def start(self):
        return self

    def tick(self):
        return {self.member_id}

    @property
    def fenced(self):
        return False

    def members(self):
        return {self.member_id}

    @contextlib.contextmanager
    def lock(self, name):
        """No backend to hold a lock in: nothing is ever exclusive here."""
        yield False

    def stop(self):
        pass


class StaticPeers(Alone):
    """``[ring] peer_list``: a fixed set of members, no liveness."""

    def __init__(self, member_id, peers):
        super().__init__(member_id)
        self._members = set(peers) | {member_id}

    def tick(self):
        return set(self._members)

    def members(self):
        return set(self._members)


def with_timeout(url, lease):
    """The backend URL with tooz's membership timeout set to the lease, unless given."""
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    if "timeout" not in query:
        query["timeout"] = [str(int(lease))]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query, doseq=True)))


class Group:
    """Membership in a tooz group with heartbeats, a lease and fencing."""

    changes_at_run_time = True  # agents join one by one, and leave
    tracks_liveness = True

    def __init__(self, backend_url, group, member_id, heartbeat=1.0, lease=10.0,
                 capabilities=b""):
        self.url = with_timeout(backend_url, lease)
        self.group = group.encode()
        self.member_id = member_id
        self.heartbeat, self.lease = heartbeat, lease
        self._capabilities = capabilities
        self._coordinator = None
        self._last_renewal = None
        self.lapses = 0  # renewals that came after the fence deadline
        self._members = set()
        self._backend = Outage("coordination backend")
        self._lock = threading.Lock()

    def _join(self):
        with self._lock:
            if self._coordinator is None:
                coordinator = coordination.get_coordinator(self.url, self.member_id.encode())
                coordinator.start(start_heart=False)
                # Only a started client is kept: one whose start failed is built
                # afresh on the next try, never used half-started.
                self._coordinator = coordinator
            try:
                self._coordinator.create_group(self.group).get()
            except coordination.GroupAlreadyExist:
                pass
            try:
                self._coordinator.join_group(self.group, self._capabilities).get()
            except coordination.MemberAlreadyExist:
                # A record left by this member's previous life (a crash): replace
                # it, or some drivers (file://) never renew it for this process.
                self._coordinator.leave_group(self.group).get()
                self._coordinator.join_group(self.group, self._capabilities).get()

    def start(self):
        """Join now if the backend answers; if not, tick() joins once it does (until
        then the agent is fenced: it writes nothing)."""
        self.tick()
        return self

    def tick(self):
        """Renew and read the live members; returns them ({} while fenced)."""
        # The lease is counted from before the renewal is sent: the backend starts it
        # when the renewal arrives, later, so a deadline counted from here never runs
        # past the backend's, however long the call blocks.
        sent = time.monotonic()
        try:
            if self._last_renewal is None:
                self._join()
            self._coordinator.heartbeat()
            try:
                members = {m.decode() for m in
                           self._coordinator.get_members(self.group).get()}
            except coordination.GroupNotCreated:  # the backend lost its data
                members = set()
            # expired while cut off (or paused where this clock stood still too): the
            # backend's word for a lapse, which the clock alone would miss
            dropped = self.member_id not in members
            if dropped:
                self._join()
                members.add(self.member_id)
            if self._last_renewal is not None and (self.fenced or dropped):
                self.lapses += 1  # the deadline passed before this renewal got through
            self._last_renewal = sent
            self._members = members
            self._backend.ok()
        # Any failure, not only tooz's: a driver's client may raise its own errors
        # (a timeout, READONLY from a replica during a failover), and membership
        # must outlive every one of them.
        except Exception as e:  # noqa: BLE001
            self._backend.failed(e, self._consequence())
            self._drop_coordinator_if_never_joined()
        return set() if self.fenced else set(self._members)

    def _consequence(self):
        where = f"group {self.group.decode()} at {_safe(self.url)}"
        if self._last_renewal is None:
            return (f"unreachable ({where}): not a member yet; this agent writes nothing "
                    f"until it joins")
        if self.fenced:
            return f"membership not renewed ({where}); writes stopped until it is"
        return (f"membership not renewed ({where}); writes stop in "
                f"{self._time_left():.0f} s unless it is")

    def _drop_coordinator_if_never_joined(self):
        """A client that never joined is built afresh on the next try (some drivers
        keep a dead connection pool after a failed start)."""
        if self._last_renewal is None and self._coordinator is not None:
            with self._lock:
                coordinator, self._coordinator = self._coordinator, None
            with contextlib.suppress(Exception):  # it is being dropped
                coordinator.stop()

    @property
    def down(self):
        """The backend's failure while it is failing, else None (for /healthz)."""
        return self._backend.error

    def _time_left(self):
        if self._last_renewal is None:
            return 0.0
        return self.lease - self.heartbeat - (time.monotonic() - self._last_renewal)

    @property
    def fenced(self):
        return self._time_left() <= 0

    def members(self):
        return set(self._members)

    def members_now(self):
        """The live members as the backend answers now (one read; raises if it fails):
        a decision that must not rest on the last renewal's view."""
        return {m.decode() for m in self._client().get_members(self.group).get()}

    def confirm(self):
        """Whether the backend still has this member (one read; raises if it fails).  Not
        there, the lease ended while this process's clocks stood still too (a VM paused
        by its hypervisor): it is fenced from now until its next renewal, which counts
        the lapse, so a writer learns it at once instead of a heartbeat later."""
        if self.member_id in self.members_now():
            return True
        if self._last_renewal is not None:
            self._last_renewal = -math.inf
        return False

    def _client(self):
        if self._coordinator is None:
            raise coordination.ToozError("not joined to the coordination backend yet")
        return self._coordinator

    @property
    def durable(self):
        """Durable names in this member's backend (``DurableNames``)."""
        return DurableNames(self._client)

    @contextlib.contextmanager
    def lock(self, name):
        """Yields whether this member holds the backend's lock ``name`` (tried once,
        never waited for): one member at a time does what it guards, however the
        members' views of each other differ.  Not held while fenced."""
        if self.fenced or self._coordinator is None:
            yield False
            return
        lock = self._coordinator.get_lock(f"{self.group.decode()}-{name}".encode())
        try:
            held = lock.acquire(blocking=False)
        except Exception as e:  # noqa: BLE001 - any driver's error: not held
            LOG.warning("lock %s not taken: %s", name, e)
            held = False
        try:
            yield held
        finally:
            if held:
                with contextlib.suppress(Exception):  # it expires in the backend
                    lock.release()

    def stop(self):
        if self._coordinator is None:
            return
        if self.fenced or self._backend.error is not None:
            # The backend has not answered for a lease, and each call to it would
            # block while its client retries; the others drop us when the lease ends.
            LOG.warning("not leaving group %s: the coordination backend is unreachable",
                        self.group.decode())
            return
        try:
            self._coordinator.leave_group(self.group).get()
        except Exception as e:  # noqa: BLE001 - the others drop us when the lease ends
            LOG.warning("could not leave group %s: %s", self.group.decode(), e)
        finally:
            with contextlib.suppress(Exception):
                self._coordinator.stop()


def _safe(url):
    """A URL fit for a log line: no password."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


class DurableNames:
    """Names in a tooz backend that outlive every lease: tooz groups that nobody joins
    last as long as the backend's data, so a set of them is a record kept beside the
    membership, reachable by every member wherever it runs (``group_record``).
    ``client``: a callable giving a started tooz coordinator."""

    def __init__(self, client):
        self._client = client

    def names(self, prefix):
        """The durable names starting with ``prefix`` (one read; raises if it fails)."""
        found = (g.decode() if isinstance(g, bytes) else g
                 for g in self._client().get_groups().get())
        return {name for name in found if name.startswith(prefix)}

    def add_name(self, name):
        """Record durable name ``name`` (idempotent; raises if the backend fails)."""
        with contextlib.suppress(coordination.GroupAlreadyExist):
            self._client().create_group(name.encode()).get()

    def remove_name(self, name):
        """Erase durable name ``name`` (idempotent; raises if the backend fails)."""
        with contextlib.suppress(coordination.GroupNotCreated):
            self._client().delete_group(name.encode()).get()


@contextlib.contextmanager
def observing(conf):
    """A started client of the configured backend that joins no group (the CLI's)."""
    observer = coordination.get_coordinator(
        with_timeout(conf.coordination.backend_url, conf.coordination.lease),
        f"rp-reporter-cli-{os.getpid()}".encode())
    observer.start(start_heart=False)
    try:
        yield observer
    finally:
        observer.stop()


def live_members(conf):
    """(members, how they are known) as configured, without joining: for the CLI."""
    if conf.coordination.backend_url:
        with observing(conf) as observer:
            try:
                members = observer.get_members(conf.coordination.group.encode()).get()
            except coordination.GroupNotCreated:
                members = set()
        return {m.decode() for m in members}, "alive"
    if conf.ring.peer_list:
        return set(conf.ring.peer_list) | {conf.host}, "static (liveness not tracked)"
    return {conf.host}, "alone"


def from_conf(conf):
    """The membership this configuration asks for."""
    if conf.coordination.backend_url:
        return Group(conf.coordination.backend_url, conf.coordination.group, conf.host,
                     heartbeat=conf.coordination.heartbeat, lease=conf.coordination.lease,
                     capabilities=conf.host.encode())
    if conf.ring.peer_list:
        return StaticPeers(conf.host, conf.ring.peer_list)
    return Alone(conf.host)
