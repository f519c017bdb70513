"""A drop-in nova-compute driver: nova's Ironic driver with rp_reporter's provider model.

    [DEFAULT]
    compute_driver = rp_reporter.IronicDriver   # nova.virt.rp_reporter (shims/nova/virt/)
    [rp_reporter]
    peers_from = nova          # or: coordination (the compute services' own group)
    config_file = /etc/rp_reporter/nova-compute.conf   # [coordination] and [ring] from here

It subclasses ``nova.virt.ironic.driver.IronicDriver``.  Where nova is the
reference it *is* nova: node ownership with ``peers_from = nova`` (the
default) is nova's own code, untouched (shard, conductor group, peer list and
its validation, the fallbacks for old Ironic API versions, the hash and the
partitions), so a fleet switched one compute service at a time never
double-claims or orphans a node.  It overrides:

* ``update_provider_tree``: the provider from rp_reporter's model, the same
  ``model.provider()`` the agent reaches through ``desired()``, fed with
  nova's own answers (``_node_resources_unavailable``,
  ``_node_resources_used``, ``_node_resource``) and nova's
  ``[workarounds] skip_reserve_in_use_ironic_nodes``.  Its deliberate
  differences from nova are listed in doc/operator-guide.md and in
  tests/nova/deliberate_differences.txt;
* with ``peers_from = coordination`` only, ``init_host``, ``_refresh_hash_ring``
  and ``_refresh_cache``: this nova-compute joins a coordination group under its
  host (a lease, renewed by a thread), the ring is rp_reporter's over the live
  members (or ``[ring] peer_list``), and nova's ``_refresh_cache`` applies it as
  it applies its own.  A change of members releases free nodes at once; a
  fenced service's nodes with instances are re-homed by their new ring owner
  (``rp_reporter.rehoming``; operator guide section 12).

nova 34 loads ``compute_driver`` only from ``nova.virt`` (``'nova.virt.%s' %
compute_driver``), so a full dotted path to this module does not load:
rp_reporter installs the one module ``nova/virt/rp_reporter.py``, which
re-exports this class, and nova-compute loads it by its own command with its
own nova.conf; no wrapper command is needed.

This is the only module that imports nova.
"""

import logging
import threading
import time

from nova import exception
from nova import objects
from nova import servicegroup
from nova.scheduler.client import report
from nova.virt.ironic import driver as ironic_driver
from openstack import exceptions as sdk_exc
from oslo_config import cfg
from oslo_utils import uuidutils

from rp_reporter import conf as rp_conf
from rp_reporter import membership
from rp_reporter import model
from rp_reporter import problems as rp_problems
from rp_reporter import rehoming
from rp_reporter import wiring
from rp_reporter.sync import plan as planner

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

NOVA_OPTS = [
    cfg.StrOpt("peers_from", default="nova", choices=["nova", "coordination"],
               help="Who owns which node. nova: nova's own code and ring, unchanged "
                    "(every live Ironic compute service, narrowed by [ironic] shard, "
                    "conductor_group and peer_list exactly as nova does). coordination: "
                    "rp_reporter's ring over the live members of a [coordination] group "
                    "that this nova-compute joins under its host (or a static [ring] "
                    "peer_list), read from config_file; survivors re-home the nodes with "
                    "instances of a fenced service; every compute service of a group must "
                    "then switch together."),
    cfg.StrOpt("config_file",
               help="rp_reporter configuration file for [coordination] and [ring]."),
    cfg.FloatOpt("rehome_pause", default=0.0, min=0.0,
                 help="Seconds between the two steps of re-homing a node from a fenced "
                      "compute service (its instance, then its compute node record). 0 in "
                      "service; a test sets it to kill the mover half-way."),
]
CONF.register_opts(NOVA_OPTS, group="rp_reporter")


def list_opts():
    return [("rp_reporter", NOVA_OPTS)]


class _NoMembers:
    """A ring with no member: nova's _refresh_cache claims no free node through it."""

    @staticmethod
    def get_nodes(key):
        return set()


NO_MEMBERS = _NoMembers()


def _log_managed(before, after, why):
    """Which nodes this service started or stopped managing, by uuid (an operator's
    answer to "who has node X"; the HA test reads the overlaps from these lines)."""
    if before != after:
        LOG.info("nodes managed here: %d; claimed %s; released %s (%s)", len(after),
                 sorted(after - before), sorted(before - after), why)


def provider_content(desired, current_inventory, current_traits, in_use):
    """(inventory, traits) for nova's ProviderTree from rp_reporter's model.

    The same rules the agent's planner applies: a class that goes while the
    node has an instance (a class change, or a cleared class) stays, fully
    reserved, until the instance is gone (its allocation lives there); the
    traits are the node's plus those nova's resource tracker owns, and the
    managed marker is kept where it is (the agent adds it; here it is not
    needed).
    """
    observed = planner.Observed(
        desired.uuid, 0, dict(current_inventory), frozenset(current_traits),
        # The instance's allocation is on whatever class the node carried.
        usages={rc: 1 for rc in current_inventory} if in_use else {})
    return (planner.target_inventories(desired, observed),
            model.provider_traits(desired, observed.traits, add_marker=False))


class IronicDriver(ironic_driver.IronicDriver):
    """nova's Ironic driver; provider content (and optionally the ring) from rp_reporter."""

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        LOG.info("rp_reporter's Ironic driver: provider content from rp_reporter's model, "
                 "node ownership from %s", CONF.rp_reporter.peers_from)
        self._rp_conf = None
        self._problems = rp_problems.ProblemLog(LOG)  # each node's, logged once
        self._membership = None  # peers_from = coordination: this service's own
        self._ring_members = None  # the members the ring was last built over
        self._released_for = None  # the members free nodes were last released for
        self._managed = set()  # the nodes this service manages, as last logged
        # nova's _refresh_cache and a prompt release (renewal thread) both set node_cache.
        self._cache_lock = threading.RLock()
        self._servicegroup_api = None  # nova's, made on first use (coordination only)

    # Ownership -----------------------------------------------------------

    def _coordinated(self):
        return CONF.rp_reporter.peers_from == "coordination"

    def _reporter_conf(self):
        if self._rp_conf is None:
            files = [CONF.rp_reporter.config_file] if CONF.rp_reporter.config_file else []
            self._rp_conf = rp_conf.load([a for f in files for a in ("--config-file", f)])
            self._rp_conf.set_override("host", CONF.host)
        return self._rp_conf

    def init_host(self, host):
        if self._coordinated():
            self._group()  # a member before nova's first ring, so peers count us at once
        super().init_host(host)

    def _group(self):
        """This service's membership (joined on first use): a tooz group member with a
        lease and a renewal thread, or [ring] peer_list (static), or alone."""
        if self._membership is None:
            conf = self._reporter_conf()
            self._membership = membership.from_conf(conf).start()
            if isinstance(self._membership, membership.Group):
                LOG.info("member %s of coordination group %s (lease %.0f s)", CONF.host,
                         conf.coordination.group, conf.coordination.lease)
                threading.Thread(target=self._renew, name="rp-reporter-membership",
                                 daemon=True).start()
        return self._membership

    def _renew(self):
        """Renew the lease every heartbeat; on a change of members (or on being
        fenced), release at once the free nodes the new ring gives to another, so a
        node has two managing services for at most the time the other takes to
        notice (claims wait for nova's next resource-tracker pass)."""
        group, heartbeat = self._membership, self._reporter_conf().coordination.heartbeat
        while True:
            time.sleep(heartbeat)
            group.tick()  # never raises: a backend failure is logged and fences us
            try:
                if self._ring_members is not None and self._members() != self._ring_members:
                    self._release_to_new_ring()
            except Exception:  # the renewals must go on whatever a release met
                LOG.exception("releasing nodes after a change of ring members failed; "
                              "nova's next node refresh does it")

    def _members(self):
        """The ring's members now: the live ones, lower-case as nova compares hosts, or
        none while this service is not a member itself (fenced, or not joined yet)."""
        group = self._group()
        members = set() if group.fenced else {m.lower() for m in group.members()}
        return members if CONF.host.lower() in members else set()

    def _refresh_hash_ring(self, ctxt):
        if not self._coordinated():
            return super()._refresh_hash_ring(ctxt)
        members = self._members()
        if members != self._ring_members:
            if members:
                LOG.info("rp_reporter ring members now %s", sorted(members))
            else:
                LOG.warning("not a live member of the coordination group: no free node is "
                            "managed here until this service is one again (nodes with its "
                            "instances stay)")
        self._ring_members = members
        self.hash_ring = self._ring_of(members)
        if members and isinstance(self._group(), membership.Group):
            self._rehome_from_fenced(ctxt, members)

    def _ring_of(self, members):
        """What nova's _refresh_cache asks ``get_nodes(node uuid)`` of: a tooz ring over
        ``members``, or one that names nobody (every free node goes unclaimed here)."""
        return wiring.ring(self._reporter_conf(), members).hashring if members else NO_MEMBERS

    def _refresh_cache(self):
        # nova's refresh lists Ironic and refreshes the ring (re-homing with it), seconds
        # under load: it runs outside the lock, so a release by the renewals never waits
        # for it (waiting, a returning service's free nodes had two managers for 6.1 s).
        # Its cache is built on the ring of its start; what the renewals released since
        # stays released.
        super()._refresh_cache()
        with self._cache_lock:
            if self._coordinated():
                self._keep_ring_nodes(self._members())
            self._now_managing(set(self.node_cache), "nova's node refresh")

    def _now_managing(self, nodes, why):
        """Log what this service started or stopped managing since the last time (nova
        also drops a node from its cache when it unprovisions it, and reads one back
        into it: the cache alone would hide a release)."""
        _log_managed(self._managed, nodes, why)
        if self._coordinated():
            self._forget_providers(self._managed - nodes)
        self._managed = nodes

    @staticmethod
    def _forget_providers(released):
        """Drop released nodes' providers from nova's report client cache.  It keeps each
        provider it wrote, generation included, after another service takes the node over
        and writes it: back here, its first write met a 409 ("Failed to update inventory",
        an ERROR line, then nova retried).  nova invalidates the same way when a rebalance
        takes an orphan compute node from it (``ComputeManager.update_available_resource``)."""
        if not released:
            return
        try:
            client = report.report_client_singleton()
            for uuid in released:
                client.invalidate_resource_provider(uuid)
        except Exception as e:  # noqa: BLE001 - the next write re-reads after its 409
            LOG.warning("could not drop %d released nodes from nova's provider cache: %s",
                        len(released), e)

    def _release_to_new_ring(self):
        # The lock is held only while a cache is filtered, never through nova's refresh.
        with self._cache_lock:
            self._release_to(self._members())

    def _release_to(self, members):
        if members == self._released_for:
            return  # done at an earlier heartbeat; nova's next refresh adopts the ring
        self._released_for = members
        kept = self._keep_ring_nodes(members)
        self._now_managing({uuid for uuid in self._managed if kept(uuid)},
                           f"ring members now {sorted(members)}")

    def _keep_ring_nodes(self, members):
        """Drop from nova's node cache the free nodes the ring over ``members`` gives to
        another service; returns the rule applied (uuid -> kept)."""
        ring = self._ring_of(members)
        me = CONF.host.lower()
        cache = dict(self.node_cache)  # a copy: nova's threads add to the cache meanwhile

        def kept(uuid):  # nova's rules: its own instance's node, or the ring's say
            node = cache.get(uuid)
            return ((node is not None and node.instance_id is not None)
                    or me in ring.get_nodes(uuid.encode()))
        self.node_cache = {uuid: node for uuid, node in cache.items() if kept(uuid)}
        return kept

    # Re-homing (rp_reporter.rehoming) ------------------------------------

    def _rehome_from_fenced(self, ctxt, members):
        """Move to this service the nodes with instances of fenced services that the
        ring gives it, one node at a time (nova-manage db ironic_compute_node_move's
        steps, without a person)."""
        # Every compute service, not only those with Ironic compute node records
        # (ServiceList.get_all_computes_by_hv_type): a mover that dies between its two
        # steps leaves an instance on a service whose free nodes the survivors may have
        # taken since, so that it has no record left; its disabled ones too.
        up_by_service = {service.host: self._servicegroup().service_is_up(service)
                         for service in objects.ServiceList.get_by_binary(
                             ctxt, "nova-compute", include_disabled=True)}
        me = CONF.host.lower()

        def owns(node):
            return me in self.hash_ring.get_nodes(node.encode())
        for host in rehoming.fenced_services(up_by_service, members, CONF.host):
            # Ironic names its nodes by uuid; another driver's hypervisor is none of ours.
            instances = [(i.node, i) for i in objects.InstanceList.get_by_host(ctxt, host)
                         if uuidutils.is_uuid_like(i.node)]
            for node, count in rehoming.refused(instances).items():
                self._problems.only(node, [f"{count} instances on fenced service {host}: not "
                                           "re-homed (nova's ironic_compute_node_move refuses "
                                           "it too)"])
            for node, (instance,) in rehoming.nodes_to_move(instances, owns):
                if self._in_scope(node):
                    self._rehome(ctxt, node, instance, host)

    def _in_scope(self, node):
        """The node is one this service may manage: in its [ironic] shard and conductor
        group, as nova's own listing filters them (a fenced service of another fleet,
        or a retired one, is none of this group's business)."""
        try:
            found = self.ironic_connection.get_node(node, fields=("uuid", "shard",
                                                                  "conductor_group"))
        except sdk_exc.NotFoundException:
            return False  # not an Ironic node (any more)
        return ((not CONF.ironic.shard or found.shard == CONF.ironic.shard)
                and (CONF.ironic.conductor_group is None
                     or found.conductor_group == CONF.ironic.conductor_group))

    def _rehome(self, ctxt, node, instance, fenced_host):
        """Instance first, then the compute node record: either step may already be
        done (a mover died half-way), and an instance homed on a service that dies
        before the second step is found again on that fenced service."""
        LOG.warning("node %s: re-homing instance %s from fenced compute service %s to %s",
                    node, instance.uuid, fenced_host, CONF.host)
        instance.host = CONF.host
        instance.save()
        time.sleep(CONF.rp_reporter.rehome_pause)
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
        LOG.warning("node %s: re-homed to %s (instance %s, compute node record)", node,
                    CONF.host, instance.uuid)

    def _servicegroup(self):
        if self._servicegroup_api is None:
            self._servicegroup_api = servicegroup.API()
        return self._servicegroup_api

    # Provider content ----------------------------------------------------

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        current = provider_tree.data(nodename)
        inventory, traits, problems = self._provider_content(
            nodename, self._node_from_cache(nodename), current)
        if current.inventory and (provider_tree.has_inventory_changed(nodename, inventory)
                                  or provider_tree.have_traits_changed(nodename, traits)):
            # nova's node cache is filled once at the start of its periodic, seconds
            # before the last of many nodes comes here: a node freed meanwhile (cleaning
            # ended) would be written back reserved, over the agents' fresher write, and
            # the report client's retry after the 409 writes the same stale content again
            # (seen: two freed nodes reserved again 1-2 s after the agents offered them,
            # and the builds sent there found no host).  So a provider Placement already
            # holds is changed only from a fresh read of its node; with nothing changed
            # no read is made, and a new provider has nothing fresher to overwrite.
            inventory, traits, problems = self._provider_content(
                nodename, self._node_read_again(nodename), current)
        # The node's problems as of the read its provider is written from, not the
        # stale cache's as well (that would log a problem the fresh read has not).
        self._problems.only(str(nodename), problems)
        provider_tree.update_inventory(nodename, inventory)
        provider_tree.update_traits(nodename, traits)

    def _provider_content(self, nodename, node, current):
        """(inventory, traits, problems) the model gives ``node`` over the provider's
        ``current``; the problems are the lines to log for the node (pure: none logged)."""
        unavailable = self._node_resources_unavailable(node)
        used = self._node_resources_used(node)
        info = self._node_resource(node)
        desired = model.provider(
            nodename, info.get("resource_class"), unavailable, used, node.traits or (),
            skip_reserve_in_use=CONF.workarounds.skip_reserve_in_use_ironic_nodes)
        # nova raises NoResourceClass for a node without a class and leaves the old
        # inventory schedulable; the model drops it (kept reserved while allocated).
        problems = [m for m in (desired.refusal,
                                desired.problem and f"offers nothing: {desired.problem}") if m]
        return (*provider_content(desired, current.inventory, current.traits, used), problems)

    def _node_read_again(self, nodename):
        """The node as Ironic has it now, kept in nova's cache; the cached one if Ironic
        does not answer (nova's own behaviour: the periodic goes on from its cache)."""
        try:
            node = self._get_node(nodename)
        except Exception as e:  # noqa: BLE001 - any SDK or connection error
            LOG.warning("node %s: not read again before its provider update (%s); "
                        "using nova's cache", nodename, e)
            return self._node_from_cache(nodename)
        self.node_cache[nodename] = node
        return node
