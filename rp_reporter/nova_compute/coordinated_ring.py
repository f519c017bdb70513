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

"""``peers_from = coordination``: the compute services' own group and ring.

This nova-compute joins a coordination group under its host (a lease, renewed by
a thread) and the ring is rp_reporter's over the live members (or ``[ring]
peer_list``); nova's ``_refresh_cache`` applies it as it applies its own.  A
change of members releases free nodes at once, so a node has two managing
services for at most the time the other takes to notice; claims wait for nova's
next resource-tracker pass.
"""

import logging
import threading
import time

from nova import context as nova_context
from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import group_record
from rp_reporter import membership
from rp_reporter import rehoming
from rp_reporter import wiring
from rp_reporter.nova_compute import fencing
from rp_reporter.nova_compute import provider_cache
from rp_reporter.nova_compute import queued_builds
from rp_reporter.nova_compute import self_fence

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class _NoMembers:
    """A ring with no member: nova's _refresh_cache claims no free node through it."""

    @staticmethod
    def get_nodes(key):
        return set()


NO_MEMBERS = _NoMembers()


def reporter_conf():
    """rp_reporter's own configuration ([coordination], [ring]) for this service."""
    files = [CONF.rp_reporter.config_file] if CONF.rp_reporter.config_file else []
    conf = rp_conf.load([a for f in files for a in ("--config-file", f)])
    conf.set_override("host", CONF.host)
    return conf


def log_managed(before, after, why):
    """Which nodes this service started or stopped managing, by uuid (an operator's
    answer to "who has node X"; the HA test reads the overlaps from these lines)."""
    if before != after:
        LOG.info("nodes managed here: %d; claimed %s; released %s (%s)", len(after),
                 sorted(after - before), sorted(before - after), why)


class CoordinatedRing:
    """The ring of one compute service over its group's live members, kept on nova's
    node cache of ``driver`` (nova's IronicDriver: ``node_cache``)."""

    def __init__(self, driver, conf=None):
        self.driver = driver
        self.conf = conf or reporter_conf()
        self.membership = None  # joined by join()
        self.self_fence = None  # fence_itself(): where servers move between services
        # Who was ever a member, and whom a mover forced down: the backend's (join()).
        self.record = None
        self.seen = set()  # every member this process saw live (the record's write-back)
        self.ring_members = None  # the members the ring was last built over
        self._members_before = None  # and the ones before the last change
        # node: (its owner before, that service no member now; the consumers booked on
        # it before this service's resource tracker first looked at it, or None: not
        # read yet): builds queued to that service (``queued_builds``)
        self.taken_from = {}
        self._ring_lapses = 0  # the membership's lapses then
        self._released_for = None  # the members free nodes were last released for
        self._managed = set()  # the nodes this service manages, as last logged
        # nova's _refresh_cache and a prompt release (renewal thread) both set node_cache.
        self._cache_lock = threading.RLock()
        self._lapses_seen = None  # the membership's lapses when forced_down was last checked
        self._next_flag_check = 0.0  # and when it is read again
        self._lifted_seen = {}  # a mover's name found with its flag lifted, at that read
        self._reports_at_start = None  # nova's report_count of this service, first read
        # Released nodes' providers leave the cache nova's resource tracker writes through.
        self.provider_cache = provider_cache.ProviderCache(lambda: novas_report_client(driver))

    # Membership ----------------------------------------------------------

    def join(self):
        """A member before nova's first ring, so peers count this service at once; with
        a backend, renewed by a thread of its own."""
        if self.membership is not None:
            return self.membership
        self.provider_cache.guard()  # before any release: nova's write-backs guarded
        self.membership = membership.from_conf(self.conf).start()
        if self.membership.tracks_liveness:
            self.record = group_record.GroupRecord(self.conf.coordination.group,
                                                   self.membership.durable)
            LOG.info("member %s of coordination group %s (lease %.0f s)", CONF.host,
                     self.conf.coordination.group, self.conf.coordination.lease)
            threading.Thread(target=self._renew, name="rp-reporter-membership",
                             daemon=True).start()
        return self.membership

    def _renew(self):
        """Renew the lease every heartbeat; on a change of members (or on being
        fenced), release at once the free nodes the new ring gives to another."""
        heartbeat, lease = self.conf.coordination.heartbeat, self.conf.coordination.lease
        while True:
            asleep = time.monotonic()
            time.sleep(heartbeat)
            self._renewal_started(time.monotonic() - asleep - heartbeat, lease)
            live = self.membership.tick()  # never raises: a backend failure fences us
            self.seen |= {member.lower() for member in live}
            try:
                if self.self_fence is not None:  # before anything acts on the lapse
                    self.self_fence.check("acting on a renewal of its membership")
                self._clear_forced_down_once_live()
                if self.ring_members is not None and self.members() != self.ring_members:
                    self.release_to_new_ring()
            except Exception:  # the renewals must go on whatever a release met
                LOG.exception("acting on a change of ring members failed; nova's next "
                              "node refresh does it")

    def _renewal_started(self, late, lease):
        """Count how late a renewal starts; say so past a third of the lease (nova's
        work kept the process from this thread: under eventlet, green threads run
        only when the one running yields)."""
        metrics = getattr(self.driver, "_metrics", None)  # none: nova's tests' stub
        if metrics is not None:
            metrics.renewal_late.observe(max(late, 0.0))
        if late > lease / 3:
            LOG.warning("membership renewal started %.1f s late (lease %.0f s): nova's "
                        "work held the process meanwhile", late, lease)

    def fence_itself(self):
        """Self-fencing (``self_fence``) from now on: the servers of a service fenced
        by the others move, so a lapse of this one's lease is checked before it acts."""
        group = self.join()
        self.self_fence = self_fence.SelfFence(group, lambda: fencing.forced_down(
            nova_context.get_admin_context(), CONF.host),
            read_within=CONF.rpc_response_timeout)
        return self.self_fence

    def members(self):
        """The ring's members now: the live ones, lower-case as nova compares hosts, or
        none while this service is not a member itself (fenced, or not joined yet)."""
        group = self.join()
        members = set() if group.fenced else {m.lower() for m in group.members()}
        return members if CONF.host.lower() in members else set()

    def members_now(self):
        """The live members as the backend answers now, lower-case (one read, not the
        last renewal's view), or None if the backend does not answer."""
        try:
            return {m.lower() for m in self.join().members_now()}
        except Exception:  # noqa: BLE001 - any backend's error: no answer
            LOG.warning("the coordination backend's members could not be read",
                        exc_info=True)
            return None

    def _clear_forced_down_once_live(self):
        """A mover forces a fenced service down before it moves its servers (nova's
        fence).  The service clears it itself while it is a live member: read at its
        start, after every lapse of its lease (a pause, a partition) and every
        ``report_interval`` (a mover that forced it down just as it rejoined), and only
        when a mover set it (an operator's or an evacuation tool's flag stays).  Where
        it fences itself, a lapse that finds it forced down restarts it first
        (``self_fence``): the flag is then cleared at its start.  Its servers moved
        meanwhile are refused one by one (``guard``), so a live member need not stay
        down.  After a lapse the service also records itself as a member of the group
        (``group_record``).  Only once nova's start-up is done, seen as a report of
        this process to nova: cleared during init_host, the flag would show nova's
        scheduler a service up by its last report before it died, and nova's start-up
        puts a build sent to it then in ERROR (it ends every build with an allocation
        on its nodes that it finds in BUILD).  Counted, not timed: the record's
        updated_at is the conductor's clock.  Tried again until nova and the backend answer."""
        group = self.membership
        lapsed = self._lapses_seen != group.lapses
        if group.fenced or not (lapsed or time.monotonic() >= self._next_flag_check):
            return
        ctxt = nova_context.get_admin_context()
        service = fencing.service_record(ctxt, CONF.host)
        if service is None or not self._reported_since_start(service):
            return
        if lapsed:
            self.record.join(CONF.host)
        mover = self.record.forced_down_by_mover(CONF.host)
        if mover and service.forced_down:
            service.forced_down = False
            service.save()
            self.record.cleared(CONF.host)
            LOG.warning("compute service %s was forced down by %s while it was not a live "
                        "member (to move its servers); it is a live member again: "
                        "forced_down cleared", CONF.host, mover)
        elif service.forced_down and lapsed:
            LOG.warning("compute service %s is forced down, not by a mover of group %s "
                        "(an operator or another tool): left as it is", CONF.host,
                        self.conf.coordination.group)
        self._lifted_seen = self.record.drop_lifted({CONF.host.lower(): service.forced_down},
                                                    self._lifted_seen)
        self._lapses_seen = group.lapses
        self._next_flag_check = time.monotonic() + max(1, CONF.report_interval)

    def _reported_since_start(self, service):
        """Whether nova's record of this service counts a report made after the first
        read of it by this process (nova reports only once its start-up is done)."""
        if self._reports_at_start is None:
            self._reports_at_start = service.report_count
        return service.report_count > self._reports_at_start

    # The ring on nova's node cache ----------------------------------------

    def refresh_ring(self):
        """The ring for nova's ``_refresh_hash_ring``: over the live members now.  Said
        when the members changed, and when this service's lease lapsed since (a pause, a
        partition): the members it sees may be the same again, as when its renewal ran
        before nova's refresh (under eventlet, nova 31 to 33)."""
        members, lapses = self.members(), self.membership.lapses
        lapsed = lapses != self._ring_lapses and self.ring_members is not None
        if members and (members != self.ring_members or lapsed):
            LOG.info("rp_reporter ring members now %s%s", sorted(members),
                     " (a live member again: its lease had lapsed)" if lapsed else "")
        elif not members and members != self.ring_members:
            LOG.warning("not a live member of the coordination group: no free node is "
                        "managed here until this service is one again (nodes with its "
                        "instances stay)")
        if members != self.ring_members:
            self._members_before = self.ring_members
        self.ring_members, self._ring_lapses = members, lapses
        return self.ring_of(members)

    def ring_of(self, members):
        """What nova's _refresh_cache asks ``get_nodes(node uuid)`` of: a tooz ring over
        ``members``, or one that names nobody (every free node goes unclaimed here)."""
        return wiring.ring(self.conf, members).hashring if members else NO_MEMBERS

    def after_novas_refresh(self):
        """nova's refresh ran outside the lock (it lists Ironic, seconds under load), so a
        release by the renewals never waits for it (waiting, a returning service's free
        nodes had two managers for 6.1 s).  Its cache was built on the ring of its start:
        what the renewals released since stays released."""
        with self._cache_lock:
            self.keep_ring_nodes(self.members())
            self.now_managing(set(self.driver.node_cache), "nova's node refresh")

    def now_managing(self, nodes, why):
        """Log what this service started or stopped managing since the last time (nova
        also drops a node from its cache when it unprovisions it, and reads one back
        into it: the cache alone would hide a release)."""
        log_managed(self._managed, nodes, why)
        if self.self_fence is not None:  # servers move: builds queued to the departed too
            taken = rehoming.taken_from_the_departed(
                nodes - self._managed, self._members_before, self.ring_members or (),
                self.ring_of)
            self.taken_from.update((node, (owner, None)) for node, owner in taken.items())
        released = self._managed - nodes
        self.provider_cache.forget(released)
        periodic_nodes = getattr(self.driver, "_periodic", None)  # none: nova's tests' stub
        if periodic_nodes is not None:
            periodic_nodes.forget(released)  # back before the next periodic: due again
        self._managed = nodes

    def first_look(self, node):
        """nova's resource tracker is about to look at ``node`` (and, on its first look
        here, move its compute node record here): the consumers booked on a node just
        taken over from a service that left are read now, before builds are cast here,
        and recorded in the group's record (what a round that fails, or a restart of
        this service, would lose otherwise)."""
        owner, booked = self.taken_from.get(node, (None, True))
        if booked is None:
            client = novas_report_client(self.driver)
            booked = client and queued_builds.booked_on(
                nova_context.get_admin_context(), client, node) or set()
            self.taken_from[node] = (owner, booked)
            if booked:
                self._record_queued(owner, node, booked)

    def _record_queued(self, owner, node, booked):
        try:
            self.record.queue(owner, node, booked)
        except Exception:  # noqa: BLE001 - kept here, and written at the next round
            LOG.warning("node %s: the builds booked on it before it was taken over from "
                        "%s could not be recorded in the group's record yet", node, owner,
                        exc_info=True)

    def booked_for(self, host, recorded):
        """{node: consumers} of the builds booked on nodes taken over from ``host``:
        this service's reads (written back to the group's record, which may have failed
        or lost them) and any member's in ``recorded`` (the record's, ``queued()``).
        Nothing is forgotten until ``settled``."""
        found = {node: set(booked) for node, booked in recorded.get(host.lower(), {}).items()}
        for node, (owner, booked) in list(self.taken_from.items()):
            if owner != host.lower() or booked is None:
                continue
            if not booked:  # nothing was booked on it: nothing to end
                self.taken_from.pop(node, None)
                continue
            if not booked <= found.get(node, set()):
                self.record.queue(host, node, booked)
            found.setdefault(node, set()).update(booked)
        return found

    def settled(self, host, done):
        """The builds ``done`` ({node: consumers}) of ``host`` need nothing more."""
        self.record.settled(host, done)
        for node, consumers in done.items():
            owner, booked = self.taken_from.get(node, (None, None))
            if owner == host.lower() and booked is not None:
                if booked - consumers:
                    self.taken_from[node] = (owner, booked - consumers)
                else:
                    self.taken_from.pop(node, None)

    def forget_taken_from(self, members):
        """Owners back in the group (``members``) take their own queued builds."""
        for node, (owner, _) in list(self.taken_from.items()):
            if owner in members:
                self.taken_from.pop(node, None)

    def release_to_new_ring(self):
        # The lock is held only while a cache is filtered, never through nova's refresh.
        with self._cache_lock:
            members = self.members()
            if members == self._released_for:
                return  # done at an earlier heartbeat; nova's next refresh adopts the ring
            self._released_for = members
            kept = self.keep_ring_nodes(members)
            self.now_managing({uuid for uuid in self._managed if kept(uuid)},
                              f"ring members now {sorted(members)}")

    def keep_ring_nodes(self, members):
        """Drop from nova's node cache the free nodes the ring over ``members`` gives to
        another service; returns the rule applied (uuid -> kept)."""
        ring = self.ring_of(members)
        me = CONF.host.lower()
        cache = dict(self.driver.node_cache)  # a copy: nova's threads add to it meanwhile

        def kept(uuid):  # nova's rules: its own instance's node, or the ring's say
            node = cache.get(uuid)
            return ((node is not None and node.instance_id is not None)
                    or me in ring.get_nodes(uuid.encode()))
        self.driver.node_cache = {uuid: node for uuid, node in cache.items() if kept(uuid)}
        return kept


def novas_report_client(driver):
    """The report client nova's resource tracker writes through: its compute manager's
    own (None where nova's tests load the driver without a manager)."""
    manager = getattr(driver.virtapi, "_compute", None)
    return getattr(manager, "reportclient", None)
