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

"""Re-homing the servers of fenced compute services: a job of its own.

Its own thread, every ``report_interval`` (the pace at which nova's services
report), never inside ``init_host`` or nova's node refresh, and only once this
service has its Service record (nova creates it after ``init_host``; a move made
before that stranded servers on a new host that then failed to start).  What is
fenced and what moves is ``rp_reporter.rehoming``'s decision (read in nova and the
group's record, and the fence written, by ``fencing``); here are its steps in nova,
each node on its own (one node's error is logged and counted, the others go on):

1. only a service that was ever a member of this group (``group_record``: durable in
   the coordination backend, not the live membership) is fenced, and only its servers
   on Ironic nodes of this service's ``[ironic]`` shard and conductor group, with no
   other server named on them in Ironic, are moved: all read before anything is
   forced down;
2. the fenced service is forced down (nova's fence; ``ironic_compute_node_move``
   requires it), the mover recorded as the one that did it, before the first of its
   servers moves;
3. under the node's lock in the coordination backend, the server is read again:
   still on the fenced service, which is still no live member;
4. the server, claimed in nova's database: its task state set to nova's ``migrating``
   by a compare-and-swap on the task state read, the mover and the task state it
   found kept in the server's system metadata, then read again (still on the fenced
   service and still this mover's claim, or the claim is given back and nothing
   moves); then its host set to this one and the task state found put back, by a
   compare-and-swap on the claim, and an instance action ``rp-reporter-rehome``
   recorded (``openstack server event list`` shows the move);
5. the node's compute node record, to this service;
6. nova's start-up handling of the server, on this service (``recovery``): a delete
   the fenced service never carried out is carried out here, a build it died in ends
   in ERROR, a power change or a reboot is retried.

The lock keeps movers apart while the coordination backend keeps its data; the claim
keeps them apart when it does not (a lock lost with the backend's data, two survivors
with different views of the members): of two movers that both read the server on the
fenced service, the second to claim either finds it moved (and moves nothing) or finds
the claim another's, and the first one's last write fails its check.  Steps 4 and 5
are each idempotent and the instance step comes first: a mover that dies between them,
or after its claim, leaves the server on itself or claimed, fenced in turn, and the next
owner finishes the move from there (a claim whose mover is no live member is finished
by the node's owner).
"""

import collections
import logging
import threading
import time

from nova import context as nova_context
from nova import exception
from nova import objects
from openstack import exceptions as sdk_exc
from oslo_config import cfg
from oslo_utils import uuidutils

from rp_reporter import rehoming
from rp_reporter.nova_compute import claim
from rp_reporter.nova_compute import fencing
from rp_reporter.nova_compute import hooks
from rp_reporter.nova_compute import queued_builds
from rp_reporter.nova_compute import recovery
from rp_reporter.nova_compute import server_groups

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
ACTION = "rp-reporter-rehome"
# A fenced service whose every server was refused (out of this service's scope) is
# looked at again after this long, or as soon as its record or the ring changes.
RECHECK_REFUSED_S = 300
# What is left of a move once the server is homed here, in order: each step idempotent
# (the action's is recorded once: a step done leaves the list); the last is nova's
# start-up handling of the server (``recovery``), tried START_UP_ATTEMPTS times.
START_UP = "nova's start-up handling"
AFTER_THE_MOVE = ("action", "compute node record", START_UP)
START_UP_ATTEMPTS = 3


class Rehoming:
    """The job: ``run_once`` moves what is due; ``start`` runs it on its own thread.

    ``ring``: the service's CoordinatedRing (its members, its membership's locks, its
    group's record); ``ironic``: a callable giving nova's openstacksdk baremetal proxy;
    ``manager``: a callable giving this service's ComputeManager (``recovery``);
    ``problems``: the driver's ProblemLog (a node left unmoved is logged once, not every
    round); ``metrics``: the driver's DriverMetrics."""

    def __init__(self, ring, ironic, problems, metrics, manager=None):
        self.ring = ring
        self.ironic = ironic
        self.manager = manager
        self.problems = problems
        self.metrics = metrics
        self.counts = collections.Counter()  # by outcome, as the metric counts them
        self.fence = fencing.Fence(ring, self._count)
        # host: (its report, the ring, until when) once nothing of it is to move here
        self._settled = {}
        # node: [instance, fenced host, the steps left of its move, start-up attempts]
        self._unfinished = {}

    def _count(self, outcome):
        self.counts[outcome] += 1
        self.metrics.rehoming.labels(outcome).inc()

    def start(self):
        threading.Thread(target=self._loop, name="rp-reporter-rehoming", daemon=True).start()
        return self

    def _loop(self):
        interval = max(1, CONF.report_interval)
        while True:
            time.sleep(interval)
            try:
                self.run_once(nova_context.get_admin_context())
            except Exception:  # noqa: BLE001 - the job goes on; each node's errors are apart
                self._count("failed")
                LOG.exception("re-homing round failed; the next round tries again")

    def run_once(self, ctxt):
        """One round: every fenced service's servers whose nodes the ring gives here."""
        members = self.ring.members()
        if not members or not self._have_service_record(ctxt):
            return
        self.ring.forget_taken_from(members)
        self._finish_unfinished(ctxt)
        hashring = self.ring.ring_of(members)
        now = time.monotonic()
        fenced = self.fence.fenced(ctxt, members)
        queued = self.ring.record.queued() if fenced else {}  # one read a round
        for host, report in fenced.items():
            self._end_queued_builds(ctxt, host, queued)
            # A dead service's record and the ring stand still: what had nothing of
            # ours once has nothing until one of them changes (its instances are not
            # loaded again every round by every survivor); what was refused, until
            # then or for RECHECK_REFUSED_S.
            key = (report, tuple(sorted(members)))
            settled = self._settled.get(host)
            if settled and settled[0] == key and now < settled[1]:
                continue
            left = self._rehome_from(ctxt, host, hashring, report)
            if left != "moving":
                self._settled[host] = (key, float("inf") if left == "nothing"
                                       else now + RECHECK_REFUSED_S)

    def _end_queued_builds(self, ctxt, host, queued):
        """End the builds cast to the fenced ``host`` that it never took, booked on the
        free nodes a survivor took over from it (``queued_builds``; ``queued``: the
        group's record of them)."""
        booked = self.ring.booked_for(host, queued)
        if booked and self.manager is not None:
            self.fence.check(f"ending the builds queued to fenced service {host}")
            done = queued_builds.end(ctxt, self.manager().reportclient, host, booked)
            self.ring.settled(host, done)

    @staticmethod
    def _have_service_record(ctxt):
        """This service has its record (a new one has none before nova made it after
        init_host: not yet) and is not forced down."""
        own = fencing.service_record(ctxt, CONF.host)
        return own is not None and not own.forced_down

    def _rehome_from(self, ctxt, host, hashring, report):
        """Move the fenced ``host``'s servers whose nodes ``hashring`` gives here
        (``report``: its last report, as the round found it fenced); returns what was
        left: "nothing" (no server of it is to move here), "refused" (every one was
        refused) or "moving" (moved, or to be tried again)."""
        me = CONF.host.lower()
        # Ironic names its nodes by uuid; another driver's hypervisor is none of ours.
        instances = [(i.node, i) for i in objects.InstanceList.get_by_host(
            ctxt, host, expected_attrs=["system_metadata"])  # its group (server_groups)
            if uuidutils.is_uuid_like(i.node)]
        for node, count in rehoming.refused(instances).items():
            self.problems.replace(
                node, [f"{count} instances on fenced service {host}: not re-homed (nova's "
                       "ironic_compute_node_move refuses it too)"])
        due = rehoming.nodes_to_move(instances,
                                     lambda node: me in hashring.get_nodes(node.encode()))
        if not due:
            return "nothing"
        scope = {node: self._in_scope(ctxt, node, instance, host)
                 for node, (instance,) in due}
        in_scope = [(node, instance) for node, (instance,) in due if scope[node]]
        if not in_scope:  # a failed look-up is tried again at the next round
            return "moving" if None in scope.values() else "refused"
        if not self.fence.force_down(ctxt, host, report):
            return "moving"  # back meanwhile: the next round reads it again
        for node, instance in in_scope:
            try:
                self._move(ctxt, node, instance, host)
            except Exception:  # noqa: BLE001 - one node's error; the others go on
                self._failed(node, instance, host)
        return "moving"

    def _failed(self, node, instance, host):
        """One node's move failed (logged with its traceback); the next round tries it
        again."""
        self._count("failed")
        LOG.exception("node %s: re-homing instance %s from %s failed; the next round "
                      "tries again", node, instance.uuid, host)

    def _in_scope(self, ctxt, node, instance, host):
        """Whether this service may take ``node`` (read before anything is forced down),
        None when Ironic's answer failed; a refusal or a failure is logged and counted.
        Its server's hard group policy is nova's evacuate check (``server_groups``)."""
        try:
            reason = (self._not_in_scope(node, instance)
                      or server_groups.refusal(ctxt, instance, CONF.host))
        except Exception:  # noqa: BLE001 - one node's error; the others go on
            self._failed(node, instance, host)
            return None
        if reason:
            self._count("refused")
            self.problems.replace(node, [f"not re-homed: {reason}"])
        return not reason

    def _move(self, ctxt, node, instance, fenced_host):
        with self.ring.membership.lock(f"rehome-{node}") as held:
            if not held:
                return  # another member moves it (or this one is fenced): not ours now
            instance = objects.Instance.get_by_uuid(ctxt, instance.uuid,
                                                    expected_attrs=["system_metadata"])
            # the backend's members now, not the last renewal's: a fenced service that
            # came back gives back a claim at its start (``claim.give_back``)
            members = self.ring.members_now()
            if instance.host != fenced_host or members is None or fenced_host.lower() in members:
                return  # moved already, or its service came back: nothing to do
            LOG.warning("node %s: re-homing instance %s from fenced compute service %s to "
                        "%s", node, instance.uuid, fenced_host, CONF.host)
            self.fence.check(f"claiming instance {instance.uuid} on node {node}")
            try:
                moved = self._move_instance(ctxt, instance, fenced_host, members,
                                            check=self.fence.check)
                hooks.pause_after("host")
            except exception.UnexpectedTaskStateError as e:
                moved = False
                LOG.warning("node %s: instance %s changed under the move (%s): another "
                            "mover or a request has it; nothing written, the next round "
                            "reads it again", node, instance.uuid, e)
            if not moved:
                self._count("lost")
                return
            self._count("moved")
            # The server is this service's from here: what is left of the move is this
            # service's to finish, here or at the next rounds (a restart finishes it
            # too: nova's start-up takes the record over and runs _init_instance).
            self._unfinished[node] = [instance.uuid, fenced_host, list(AFTER_THE_MOVE), 0]
        self._finish(ctxt, node)

    def _finish_unfinished(self, ctxt):
        for node in list(self._unfinished):
            self._finish(ctxt, node)

    def _finish(self, ctxt, node):
        """The steps left of the move of ``node``'s server, in order; one that fails is
        tried again at the next round (nova's start-up handling, at most
        START_UP_ATTEMPTS times: nova runs it once at a restart)."""
        uuid, fenced_host, steps, attempts = self._unfinished[node]
        while steps:
            step = steps[0]
            # This mover may have lost its turn since the last step (paused past its
            # lease, cut off): another then finishes the move, and this one writes nothing.
            self.fence.check(f"the move's step {step!r} on node {node}")
            try:
                if step == "action":
                    self._record_action(ctxt, uuid)
                elif step == "compute node record":
                    self._move_compute_node(ctxt, node)
                    LOG.warning("node %s: re-homed to %s (instance %s, compute node "
                                "record)", node, CONF.host, uuid)
                elif self.manager is not None:
                    self._unfinished[node][3] = attempts = attempts + 1
                    recovery.recover(self.manager(), ctxt,
                                     objects.Instance(uuid=uuid), fenced_host)
            except Exception:  # noqa: BLE001 - the job goes on; tried again next round
                self._count("failed")
                LOG.exception("node %s: instance %s re-homed here; its move's step %r "
                              "failed%s", node, uuid, step,
                              "" if step == START_UP and attempts >= START_UP_ATTEMPTS
                              else "; the next round tries it again")
                if step != START_UP or attempts < START_UP_ATTEMPTS:
                    return
            steps.pop(0)
            hooks.pause_after(step)
        del self._unfinished[node]

    @staticmethod
    def _record_action(ctxt, uuid):
        """An instance action per move (``openstack server event list``)."""
        me = CONF.host
        objects.InstanceAction.action_start(ctxt, uuid, ACTION, want_result=False)
        objects.InstanceActionEvent.event_start(ctxt, uuid, ACTION, want_result=False,
                                                host=me)
        objects.InstanceActionEvent.event_finish(ctxt, uuid, ACTION, want_result=False)

    def _not_in_scope(self, node, instance):
        """Why this service must not take ``node``, or None: not an Ironic node of its
        [ironic] shard and conductor group (as nova's own listing filters them), or
        Ironic names another server on it (nova-manage's own caveat)."""
        try:
            found = self.ironic().get_node(node, fields=("uuid", "shard", "conductor_group",
                                                         "instance_id"))
        except sdk_exc.NotFoundException:
            return "Ironic has no such node"
        if CONF.ironic.shard and found.shard != CONF.ironic.shard:
            return f"in shard {found.shard}, not {CONF.ironic.shard}"
        if (CONF.ironic.conductor_group is not None
                and found.conductor_group != CONF.ironic.conductor_group):
            return f"in conductor group {found.conductor_group}"
        if found.instance_id and found.instance_id != instance.uuid:
            return f"Ironic names instance {found.instance_id} on it, nova {instance.uuid}"
        return None

    @staticmethod
    def _move_instance(ctxt, instance, fenced_host, members=(), check=lambda what: None):
        """Step 4 (``claim.move_instance``); ``check``, the self-fence, between its claim
        and its write of the server's host."""
        def claimed():
            hooks.pause_after("claim")
            check(f"moving instance {instance.uuid} here")
        return claim.move_instance(ctxt, instance, fenced_host, members, claimed=claimed)

    @staticmethod
    def _move_compute_node(ctxt, node):
        try:
            compute_node = objects.ComputeNode.get_by_uuid(ctxt, node)
        except exception.ComputeHostNotFound:
            LOG.error("node %s: no compute node record; the instance is re-homed, nova's "
                      "resource tracker makes the record", node)
            return
        if compute_node.host != CONF.host:
            compute_node.host = CONF.host
            compute_node.service_id = objects.Service.get_by_compute_host(ctxt, CONF.host).id
            compute_node.save()
