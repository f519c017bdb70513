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

"""The IronicDriver nova-compute loads: nova's, with its parts from this package."""

import functools
import inspect
import logging
import sys

from nova import context as nova_context
from nova import exception as nova_exception
from nova.virt.ironic import driver as ironic_driver
from oslo_config import cfg

from rp_reporter import problems as rp_problems
from rp_reporter.nova_compute import claim
from rp_reporter.nova_compute import content
from rp_reporter.nova_compute import coordinated_ring
from rp_reporter.nova_compute import deleted_nodes
from rp_reporter.nova_compute import guard
from rp_reporter.nova_compute import hooks
from rp_reporter.nova_compute import metrics as driver_metrics
from rp_reporter.nova_compute import node_listing
from rp_reporter.nova_compute import operator_flags
from rp_reporter.nova_compute import options  # noqa: F401 - registers [rp_reporter]
from rp_reporter.nova_compute import orphaned_nodes
from rp_reporter.nova_compute import periodic
from rp_reporter.nova_compute import rehome
from rp_reporter.nova_compute import restart

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
TOUCHING = ("spawn", "destroy", "failed_spawn_cleanup")  # a node nova updates next


def _guarded(name, instance_at):
    """nova's ``name``, run only on a server still homed here (``guard``) when servers
    can move between services; ``instance_at``: the instance's position in the args."""
    novas = getattr(ironic_driver.IronicDriver, name)

    @functools.wraps(novas)
    def operation(self, *args, **kwargs):
        instance = kwargs["instance"] if "instance" in kwargs else args[instance_at]
        if getattr(self, "_rehoming", None) is not None:  # nova's tests may skip __init__
            self._fence_check(name, confirm=True)
            guard.check(instance, name, self._metrics)
        try:
            return novas(self, *args, **kwargs)
        finally:
            self._operated(name, instance)
    # nova's own signature, for nova's check of a driver's public API against
    # ComputeDriver's (inspect.getfullargspec reads __signature__, not __wrapped__).
    operation.__signature__ = inspect.signature(novas)
    return operation


class IronicDriver(content.ProviderContent, ironic_driver.IronicDriver):
    """nova's Ironic driver; provider content (and optionally the ring) from rp_reporter."""

    _periodic = periodic.EVERY_NODE  # until __init__ (nova's tests may skip it)
    _listing = None
    _deletes = None  # the listener of Ironic's notifications of deleted nodes, if any
    _operator_flags = None  # and of nova's service.update, where services are re-homed

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        LOG.info("rp_reporter's Ironic driver: provider content from rp_reporter's model, "
                 "node ownership from %s", CONF.rp_reporter.peers_from)
        self._problems = rp_problems.ProblemLog(LOG)  # each node's, logged once
        self._ring = None  # peers_from = coordination: this service's CoordinatedRing
        self._rehoming = None  # and its re-homing job, where membership tracks liveness
        self._self_fence = None  # and then its self-fence (``self_fence``)
        self._orphans = None  # deployed nodes nothing owns, looked for (``orphaned_nodes``)
        self._managed = set()  # peers_from = nova: the nodes managed here, as last logged
        self._metrics = driver_metrics.DriverMetrics()
        self._periodic = periodic.PeriodicNodes(CONF.rp_reporter.full_pass_every)
        self._listing = None  # full_pass_every above 1: the fleet, listed where it changed
        if self._periodic.passes.enabled:
            self._listing = node_listing.NodeListing(
                lambda: self.ironic_connection, self._periodic.passes.longest_s,
                self._metrics.node_list_requests, failing=self._metrics.whole_listing_failing,
                alert_after=CONF.rp_reporter.listing_failures_alert)

    def _coordinated(self):
        return CONF.rp_reporter.peers_from == "coordination"

    def _coordinated_ring(self):
        if self._ring is None:
            self._ring = coordinated_ring.CoordinatedRing(self)
        return self._ring

    def init_host(self, host):
        if self._coordinated():
            group = self._coordinated_ring().join()
            if CONF.rp_reporter.rehome and group.tracks_liveness:
                # nova's manager: a moved server's start-up handling runs on it, and
                # each request it takes for a server is checked first (``guard``).
                # The self-fence first: the job's every write passes it (``fencing``).
                manager = getattr(self.virtapi, "_compute", None)
                self._self_fence = self._ring.fence_itself()
                self._rehoming = rehome.Rehoming(
                    self._ring, lambda: self.ironic_connection, self._problems,
                    self._metrics, manager=manager and (lambda: manager)).start()
                claim.give_back(nova_context.get_admin_context(), CONF.host)
                if manager is not None:
                    guard.guard_manager(manager, self._ring.membership, self._metrics,
                                        self._self_fence)
                # an operator's forced_down on a fenced service: not the mover's to clear
                self._operator_flags = operator_flags.listen(self._ring.record)
            if group.tracks_liveness and CONF.rp_reporter.orphaned_nodes_interval:
                self._orphans = orphaned_nodes.OrphanWatch(
                    self._ring, lambda: self.ironic_connection, self._metrics).start()
            if CONF.rp_reporter.metrics_bind:
                self._metrics.serve(CONF.rp_reporter.metrics_bind,
                                    lambda: bool(self._ring.members()))
        if self._listing is not None and CONF.rp_reporter.config_file:
            # a listing of what changed cannot see a delete: Ironic's notification can
            self._deletes = deleted_nodes.listen(coordinated_ring.reporter_conf(), CONF.host,
                                                 self._listing)
        super().init_host(host)

    def cleanup_host(self, host):
        # nova's service stop: the notification listener's connection closed with it
        for name in ("_deletes", "_operator_flags"):
            listener = getattr(self, name)
            setattr(self, name, None)
            if listener is not None:
                listener.stop()
        super().cleanup_host(host)

    def _fence_check(self, what, confirm=False):
        fence = getattr(self, "_self_fence", None)  # nova's tests may skip __init__
        if fence is not None:
            fence.check(what, confirm)

    @property
    def ironic_connection(self):
        # Every request of the driver's to Ironic, each poll of a deploy, a power change
        # or a delete included: a service that may have been fenced stops first.
        # super(), not nova's class by name: nova's conformance module rebinds that name
        # to this class.
        self._fence_check("a request to Ironic")
        return super().ironic_connection

    def prepare_networks_before_block_device_mapping(self, instance, network_info):
        super().prepare_networks_before_block_device_mapping(instance, network_info)
        hooks.pause_after("vifs", of="the build")
        # nova's next write saves the server with no expected task state (its block
        # device step): a service paused after its last VIF attach, whose server moved
        # meanwhile, would put it back to BUILD on its new home.  It stops here first.
        self._fence_check(f"nova's save of instance {instance.uuid} after its VIFs",
                          confirm=True)

    def _wait_for_active(self, instance):
        # nova's poll of a deploy reads the instance before Ironic: a server moved away
        # while this service was paused would end its build here as a failure.
        self._fence_check(f"the wait for instance {instance.uuid}'s deploy", confirm=True)
        return super()._wait_for_active(instance)

    def get_available_nodes(self, refresh=False):
        # nova's resource-tracker periodic calls this first: the nodes it goes over; a
        # build calls it too, for its first node.  The same answer either way.
        caller = sys._getframe(1)
        manager = getattr(self.virtapi, "_compute", None)
        take_up = None
        if self._periodic.passes.enabled and manager and periodic.at_start(caller):
            take_up = functools.partial(
                restart.take_up, manager, super().get_available_resource)
        novas_periodic = periodic.novas_periodic(caller)
        if novas_periodic and self._periodic.passes.enabled:
            self._periodic.passes.service_status(periodic.service_disabled(CONF.host))
        # nova's periodic looks at the nodes of the answer: each is checked in Ironic
        # first where the periodic's own listing did not hold it (a build's question
        # needs no check: nova looks at no node for it)
        listing = self._listing if novas_periodic else None
        return self._periodic.for_periodic(
            super().get_available_nodes(refresh), self.node_cache, log=novas_periodic,
            in_scope=listing and listing.in_scope,
            seen=listing and (listing.refreshed_at, listing.seen), take_up=take_up)

    def get_available_resource(self, nodename):
        # nova's resource tracker calls this once per node it goes over (a periodic, the
        # service's start): nova's look at the node.
        if getattr(self, "_rehoming", None) is not None:  # nova's tests may skip __init__
            self._ring.first_look(nodename)  # before nova moves its record here
        resources = super().get_available_resource(nodename)
        self._periodic.looked_at(nodename, lambda: self.node_cache.get(nodename))
        return resources

    def _operated(self, name, instance):
        # After nova's operation ``name`` on ``instance`` ran or raised: nova heals
        # allocations and counts failed builds only at the node's update.
        if name in TOUCHING and self._periodic.passes.enabled:
            self._periodic.touched(instance.get("node"))

    def get_nodenames_by_uuid(self, refresh=False):
        # init_host's view of the nodes managed here: every one, whatever the periodic,
        # but those whose records other services still hold (restart.nodes_at_start).
        nodes = super().get_available_nodes(refresh)
        if self._coordinated():
            nodes = restart.nodes_at_start(nova_context.get_admin_context(), CONF.host, nodes)
        return {node: node for node in nodes}

    def is_node_deleted(self, nodename):
        return (not self._periodic.known_to_exist(nodename)
                and super().is_node_deleted(nodename))

    def _get_node_list(self, return_generator=False, **kwargs):
        if (self._listing is not None and not return_generator
                and kwargs.get("fields") == ironic_driver._NODE_FIELDS
                and set(kwargs) <= {"fields", "shard", "conductor_group"}):
            # nova's node refresh (_refresh_cache): the fleet it lists, from the nodes
            # written since the last listing (nova's own code then picks this
            # service's nodes from it, as from a listing of its own).
            try:
                nodes = self._listing.nodes(**kwargs)
                whole_at = self._listing.view.full_at
            except nova_exception.VirtDriverNotReady:
                raise
            except Exception:  # noqa: BLE001 - a defect of ours must not stop nova
                LOG.exception("rp_reporter's listing of the nodes written since failed; "
                              "nova's own listing of the whole fleet instead")
                self._listing.reset()
                whole_at = self._periodic.clock()
                nodes = super()._get_node_list(return_generator, **kwargs)
        else:
            whole_at = self._periodic.clock()
            nodes = super()._get_node_list(return_generator, **kwargs)
        if not return_generator and "associated" not in kwargs:
            # the fleet, as nova's node refresh lists it
            self._periodic.listed(nodes, whole_at)
        return nodes

    def _refresh_hash_ring(self, ctxt):
        if not self._coordinated():
            return super()._refresh_hash_ring(ctxt)
        self.hash_ring = self._coordinated_ring().refresh_ring()

    def _refresh_cache(self):
        super()._refresh_cache()
        if self._coordinated():
            self._coordinated_ring().after_novas_refresh()
        else:
            nodes = set(self.node_cache)
            coordinated_ring.log_managed(self._managed, nodes, "nova's node refresh")
            self._managed = nodes

    prepare_for_spawn = _guarded("prepare_for_spawn", 0)
    spawn = _guarded("spawn", 1)
    failed_spawn_cleanup = _guarded("failed_spawn_cleanup", 0)
    destroy = _guarded("destroy", 1)
    reboot = _guarded("reboot", 1)
    power_off = _guarded("power_off", 0)
    power_on = _guarded("power_on", 1)
    rebuild = _guarded("rebuild", 1)
    rescue = _guarded("rescue", 1)
    unrescue = _guarded("unrescue", 1)
    trigger_crash_dump = _guarded("trigger_crash_dump", 0)
    attach_interface = _guarded("attach_interface", 1)
    detach_interface = _guarded("detach_interface", 1)
