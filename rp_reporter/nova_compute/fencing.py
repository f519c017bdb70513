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

"""The fence of the re-homing job (``rehome``): which compute services are fenced, and
forcing one down before its servers move.

Only a service that was ever a member of this group (``group_record``) is looked at;
it is fenced when it is no live member, nova reports it down (its report stalled on
this mover's own clock, or forced down: ``rehoming.ReportWatch``), and no operator
holds it down on purpose (``compute-group hold``, within its bound).  Each round also
keeps the group's record: what the backend lost, written back; a mover's name whose
flag an operator lifted, dropped.  The service records of nova read here are also what
the service itself reads (its own flag: ``coordinated_ring``, ``self_fence``,
``guard``)."""

import logging
import time

from nova import exception
from nova import objects
from nova import servicegroup
from oslo_config import cfg

from rp_reporter import rehoming
from rp_reporter.nova_compute import hooks

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


def service_record(ctxt, host):
    """nova's Service record of compute ``host``, or None when it has none."""
    try:
        return objects.Service.get_by_compute_host(ctxt, host)
    except exception.ComputeHostNotFound:
        return None


def forced_down(ctxt, host):
    """Whether nova has compute service ``host`` forced down (none yet: a new service,
    nothing forced)."""
    service = service_record(ctxt, host)
    return service is not None and service.forced_down


class Fence:
    """``ring``: the service's CoordinatedRing (its members, its group's record);
    ``count``: the job's count of an outcome (``fenced``)."""

    def __init__(self, ring, count):
        self.ring = ring
        self._count = count
        self.watch = rehoming.ReportWatch(CONF.service_down_time)
        self._servicegroup = None
        self._lifted = {}  # movers' names found with their flag lifted (group_record)
        self._forced_here = {}  # host: this mover, for the flags it set (write_back)
        self._held_said = set()  # (host, until) of the holds logged
        self._holds_seen = {}  # {host: until} of the holds read, not ended (write-back)
        self._hold_ends = {}  # {(host, until): its end on the monotonic clock}
        self._epoch = None  # the group's record's epoch as last read (``group_record``)

    def fenced(self, ctxt, members):
        """{host: its last report} of the fenced compute services."""
        # Every compute service that was ever a member of this group (its record, not
        # the live membership), not only those with Ironic compute node records: a
        # mover that dies between its two steps leaves an instance on a service whose
        # free nodes the survivors may have taken since; its disabled ones too.
        services = objects.ServiceList.get_by_binary(ctxt, "nova-compute",
                                                     include_disabled=True)
        forced = {s.host.lower(): s.forced_down for s in services}
        # One read of the holds and the record's epoch: a new epoch, the backend lost
        # its data, and this mover writes back what it knew (``group_record``).
        holds, epoch = self.ring.record.holds_and_epoch()
        lost = self._epoch is not None and epoch != self._epoch
        recorded, movers = self.ring.record.write_back(
            self.ring.seen, self._forced_here if lost else {}, forced)
        # This mover's names gone with no loss were dropped on purpose (the service
        # cleared its flag, or an operator took the flag over: ``operator_flags``):
        # never written back later.
        self._forced_here = {h: m for h, m in self._forced_here.items()
                             if forced.get(h) and h in movers}
        holds = self._holds(holds, lost, time.time())
        self._epoch = epoch  # once written back: a failed round writes back at the next
        services = [s for s in services if s.host.lower() in recorded]
        # A mover's name whose flag an operator lifted goes, whether or not its service
        # is back to drop it (an operator's flag set later is then never a mover's).
        self._lifted = self.ring.record.drop_lifted(forced, self._lifted, movers)
        now = time.monotonic()
        reports = {s.host: (s.report_count, s.updated_at) for s in services}
        up = {s.host: not self.watch.down(s.host, reports[s.host], s.forced_down,
                                          self._servicegroup_api().service_is_up(s), now)
              for s in services}
        down = {h for h, is_up in up.items() if not is_up}
        held = self._held_now(holds)
        self._say_held({h for h in down if h.lower() in held}, holds)
        return {host: reports[host]
                for host in rehoming.fenced_services(up, members, CONF.host, held)}

    def _holds(self, holds, lost, now):
        """The operators' ``holds`` as read this round: where the backend ``lost`` its
        data it lost them too, and those this mover saw whose bound is ahead are written
        back, as the members and the movers' names are, or a held service would be
        fenced."""
        if lost:
            for host, until in sorted(self._holds_seen.items()):
                if until > now and host not in holds:
                    self.ring.record.hold(host, until)
                    holds[host] = until
                    LOG.warning("compute service %s: its hold (rp-reporter compute-group "
                                "hold) was lost with the coordination backend's data; "
                                "written back", host)
        self._holds_seen = {host: until for host, until in holds.items() if until > now}
        return holds

    def _held_now(self, holds):
        """The hosts of ``holds`` held now.  The operator's bound is a wall clock's (the
        CLI host's), read against this mover's once, at its first read of the hold; its
        end is kept on the monotonic clock from then (``rehoming.hold_ends``), so a step
        of this mover's wall clock fences no held service."""
        monotonic_now = time.monotonic()
        self._hold_ends = rehoming.hold_ends(holds, self._hold_ends, time.time(),
                                             monotonic_now)
        return rehoming.held_now(self._hold_ends, monotonic_now)

    def _say_held(self, hosts, holds):
        """Log each service down under an operator's hold, once a hold."""
        for host in sorted(hosts):
            hold = (host.lower(), holds[host.lower()])
            if hold not in self._held_said:
                self._held_said.add(hold)
                LOG.warning("compute service %s is down but held until %s (rp-reporter "
                            "compute-group hold): not fenced, its servers stay", host,
                            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(hold[1])))

    def force_down(self, ctxt, host, report):
        """Force ``host`` down, unless it came back since the round found it fenced
        (``report``: its last report then); whether it is fenced now.  The scope's reads
        took seconds: live membership and nova's record are read again right before the
        write, so a service that rejoined meanwhile (and cleared a flag of a mover's
        once already) is never forced down after it."""
        service = service_record(ctxt, host)
        if service is not None and not service.forced_down:
            members = self.ring.members_now()
            if ((service.report_count, service.updated_at) != report or members is None
                    or host.lower() in members):
                LOG.info("compute service %s not forced down: it came back while its "
                         "servers' nodes were read (it reported to nova, or rejoined the "
                         "group), or the group's members could not be read again", host)
                return False
        if service is not None and not service.forced_down:  # none: no record to fence
            hooks.pause_after("fence decided")
            if host.lower() in self._held_now(self.ring.record.holds()):
                LOG.warning("compute service %s not forced down: an operator held it (rp-"
                            "reporter compute-group hold) while its servers' nodes were "
                            "read", host)
                return False
            self.check(f"forcing compute service {host} down")
            self.ring.record.forced_down(host, CONF.host)
            self._forced_here[host.lower()] = CONF.host
            service.forced_down = True
            service.save()
            self._count("fenced")
            LOG.warning("compute service %s forced down: it is fenced (no live member of "
                        "the group, nova reports it down) and its servers move to live "
                        "members; it clears this itself once it is a live member again",
                        host)
            hooks.pause_after("forced down")
        return True

    def check(self, what):
        """Before each write of the job (``what``, for the log): a mover that may have
        lost its turn (its lease lapsed: paused, cut off) restarts before it writes
        (``self_fence``); another member moved what it was moving, and a write of its
        now would undo that (a compute node record back on itself, a fence of a service
        that came back)."""
        if self.ring.self_fence is not None:
            self.ring.self_fence.check(what, confirm=True)

    def _servicegroup_api(self):
        if self._servicegroup is None:
            self._servicegroup = servicegroup.API()
        return self._servicegroup
