"""Re-homing the servers of fenced compute services: a job of its own.

Its own thread, every ``report_interval`` (the pace at which nova's services
report), never inside ``init_host`` or nova's node refresh, and only once this
service has its Service record (nova creates it after ``init_host``; a move made
before that stranded servers on a new host that then failed to start).  What is
fenced and what moves is ``rp_reporter.rehoming``'s decision; here are its steps
in nova, each node on its own (one node's error is logged and counted, the others
go on):

1. the fenced service is forced down (nova's fence; ``ironic_compute_node_move``
   requires it) before the first of its servers moves;
2. under the node's lock in the coordination backend, the server is read again:
   still on the fenced service, which is still no live member, and Ironic's node
   still names the server;
3. the server, claimed in nova's database: its task state set to this mover's claim
   by a compare-and-swap on the task state read, then read again (still on the fenced
   service, or the claim is given back and nothing moves); then its host set to this
   one and its task state cleared, by a compare-and-swap on the claim (the dead
   service's task state is dropped as nova's ``_init_instance`` drops it for a service
   that restarts: a queued RPC for it then fails its expected-task-state check on the
   old service), and an instance action ``rp-reporter-rehome`` recorded (``openstack
   server event list`` shows the move);
4. the node's compute node record, to this service.

The lock keeps movers apart while the coordination backend keeps its data; the claim
keeps them apart when it does not (a lock lost with the backend's data, two survivors
with different views of the members): of two movers that both read the server on the
fenced service, the second to claim either finds it moved (and moves nothing) or takes
the claim over, and then the first one's last write fails its check.  Steps 3 and 4 are
each idempotent and the instance step comes first: a mover that dies between them, or
after its claim, leaves the server on itself or claimed, fenced in turn, and the next
owner finishes the move from there.
"""

import collections
import logging
import os
import threading
import time

from nova import context as nova_context
from nova import exception
from nova import objects
from nova import servicegroup
from openstack import exceptions as sdk_exc
from oslo_config import cfg
from oslo_utils import uuidutils

from rp_reporter import rehoming

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
ACTION = "rp-reporter-rehome"
# A mover's claim on a server, as its task state for the few milliseconds of a move (nova
# shows a task state it does not know with the server's status as it is).
CLAIM = "rp-reporter-rehoming-{host}"
# A test's hook, not an option: seconds between a move's instance step and its compute
# node step, so a test can kill the mover half-way.
STEP_PAUSE = float(os.environ.get("RP_REPORTER_TEST_REHOME_STEP_PAUSE", "0"))


def service_record(ctxt, host):
    """nova's Service record of compute ``host``, or None when it has none."""
    try:
        return objects.Service.get_by_compute_host(ctxt, host)
    except exception.ComputeHostNotFound:
        return None


class Rehoming:
    """The job: ``run_once`` moves what is due; ``start`` runs it on its own thread.

    ``ring``: the service's CoordinatedRing (its members, its membership's locks);
    ``ironic``: a callable giving nova's openstacksdk baremetal proxy; ``problems``: the
    driver's ProblemLog (a node left unmoved is logged once, not every round);
    ``metrics``: the driver's DriverMetrics."""

    def __init__(self, ring, ironic, problems, metrics):
        self.ring = ring
        self.ironic = ironic
        self.problems = problems
        self.metrics = metrics
        self.watch = rehoming.ReportWatch(CONF.service_down_time)
        self.counts = collections.Counter()  # by outcome, as the metric counts them
        self._servicegroup = None
        self._settled = {}  # host: (its report, the ring) when it had nothing of ours

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
        hashring = self.ring.ring_of(members)
        for host, report in self._fenced(ctxt, members).items():
            # A dead service's record and the ring stand still: what had nothing of
            # ours once has nothing until one of them changes (its instances are not
            # loaded again every round by every survivor).
            settled = (report, tuple(sorted(members)))
            if self._settled.get(host) != settled and not self._rehome_from(
                    ctxt, host, hashring):
                self._settled[host] = settled

    @staticmethod
    def _have_service_record(ctxt):
        """This service has its record (a new one has none before nova made it after
        init_host: not yet) and is not forced down."""
        own = service_record(ctxt, CONF.host)
        return own is not None and not own.forced_down

    def _fenced(self, ctxt, members):
        """{host: its last report} of the fenced compute services."""
        # Every compute service, not only those with Ironic compute node records: a
        # mover that dies between its two steps leaves an instance on a service whose
        # free nodes the survivors may have taken since; its disabled ones too.
        services = objects.ServiceList.get_by_binary(ctxt, "nova-compute",
                                                     include_disabled=True)
        now = time.monotonic()
        reports = {s.host: (s.report_count, s.updated_at) for s in services}
        up = {s.host: not self.watch.down(s.host, reports[s.host], s.forced_down,
                                          self._servicegroup_api().service_is_up(s), now)
              for s in services}
        return {host: reports[host]
                for host in rehoming.fenced_services(up, members, CONF.host)}

    def _rehome_from(self, ctxt, host, hashring):
        """Move the fenced ``host``'s servers whose nodes ``hashring`` gives here; returns
        whether there were any."""
        me = CONF.host.lower()
        # Ironic names its nodes by uuid; another driver's hypervisor is none of ours.
        instances = [(i.node, i) for i in objects.InstanceList.get_by_host(ctxt, host)
                     if uuidutils.is_uuid_like(i.node)]
        for node, count in rehoming.refused(instances).items():
            self.problems.replace(
                node, [f"{count} instances on fenced service {host}: not re-homed (nova's "
                       "ironic_compute_node_move refuses it too)"])
        due = rehoming.nodes_to_move(instances,
                                     lambda node: me in hashring.get_nodes(node.encode()))
        if not due:
            return False
        self._force_down(ctxt, host)
        for node, (instance,) in due:
            try:
                self._move(ctxt, node, instance, host)
            except Exception:  # noqa: BLE001 - one node's error; the others go on
                self._count("failed")
                LOG.exception("node %s: re-homing instance %s from %s failed; the next "
                              "round tries again", node, instance.uuid, host)
        return True

    def _force_down(self, ctxt, host):
        service = service_record(ctxt, host)
        if service is not None and not service.forced_down:  # none: no record to fence
            service.forced_down = True
            service.save()
            self._count("fenced")
            LOG.warning("compute service %s forced down: it is fenced (no live member of "
                        "the group, nova reports it down) and its servers move to live "
                        "members; it clears this itself once it is a live member again",
                        host)

    def _move(self, ctxt, node, instance, fenced_host):
        with self.ring.membership.lock(f"rehome-{node}") as held:
            if not held:
                return  # another member moves it (or this one is fenced): not ours now
            instance = objects.Instance.get_by_uuid(ctxt, instance.uuid, expected_attrs=[])
            if instance.host != fenced_host or fenced_host.lower() in self.ring.members():
                return  # moved already, or its service came back: nothing to do
            reason = self._not_in_scope(node, instance)
            if reason:
                self._count("refused")
                self.problems.replace(node, [f"not re-homed: {reason}"])
                return
            LOG.warning("node %s: re-homing instance %s from fenced compute service %s to "
                        "%s", node, instance.uuid, fenced_host, CONF.host)
            try:
                moved = self._move_instance(ctxt, instance, fenced_host)
            except exception.UnexpectedTaskStateError as e:
                moved = False
                LOG.warning("node %s: instance %s changed under the move (%s): another "
                            "mover or a request has it; nothing written, the next round "
                            "reads it again", node, instance.uuid, e)
            if not moved:
                self._count("lost")
                return
            time.sleep(STEP_PAUSE)
            self._move_compute_node(ctxt, node)
            self._count("moved")
            LOG.warning("node %s: re-homed to %s (instance %s, compute node record)", node,
                        CONF.host, instance.uuid)

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
    def _move_instance(ctxt, instance, fenced_host):
        """Step 3: whether the server moved here (False: another mover moved it first).
        nova's UnexpectedTaskStateError: another mover, or nova, changed it meanwhile."""
        claim = CLAIM.format(host=CONF.host)
        found = instance.task_state
        instance.task_state = claim
        instance.save(expected_task_state=[found])
        instance = objects.Instance.get_by_uuid(ctxt, instance.uuid, expected_attrs=[])
        if instance.host != fenced_host:  # moved before the claim: give it back
            instance.task_state = found
            instance.save(expected_task_state=[claim])
            return False
        instance.task_state = None
        instance.host = CONF.host
        instance.save(expected_task_state=[claim])
        if found is not None and not found.startswith(CLAIM.format(host="")):
            LOG.warning("instance %s: task state %s cleared (its service died in it)",
                        instance.uuid, found)
        # Recorded once the move is made: one action per move, none for a lost one.
        objects.InstanceAction.action_start(ctxt, instance.uuid, ACTION, want_result=False)
        objects.InstanceActionEvent.event_start(ctxt, instance.uuid, ACTION,
                                                want_result=False, host=CONF.host)
        objects.InstanceActionEvent.event_finish(ctxt, instance.uuid, ACTION,
                                                 want_result=False)
        return True

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

    def _servicegroup_api(self):
        if self._servicegroup is None:
            self._servicegroup = servicegroup.API()
        return self._servicegroup
