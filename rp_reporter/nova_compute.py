"""A drop-in nova-compute driver: nova's Ironic driver with rp_reporter's ring and model.

    [DEFAULT]
    compute_driver = rp_reporter.nova_compute.IronicDriver
    [rp_reporter]
    peers_from = nova          # or: coordination (the agents' group or peer list)
    config_file = /etc/rp_reporter/rp_reporter.conf   # [coordination] and [ring] from here

It subclasses ``nova.virt.ironic.driver.IronicDriver`` and overrides only node
ownership (the ring refresh and the node cache behind ``get_available_nodes``)
and ``update_provider_tree``, delegating to the same ring and model code the
agent uses.  Everything else is nova's.  This is the only module that imports
nova.
"""

import logging
import time

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.virt.ironic import driver as ironic_driver
from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import membership
from rp_reporter import model
from rp_reporter import ring as rp_ring
from rp_reporter import wiring
from rp_reporter.sync import plan as planner

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

NOVA_OPTS = [
    cfg.StrOpt("peers_from", default="nova", choices=["nova", "coordination"],
               help="Ring members: nova's live compute services running this driver, or "
                    "the members of rp_reporter's [coordination] group (or [ring] "
                    "peer_list) read from config_file."),
    cfg.StrOpt("config_file",
               help="rp_reporter configuration file for [coordination] and [ring]."),
]
CONF.register_opts(NOVA_OPTS, group="rp_reporter")


def list_opts():
    return [("rp_reporter", NOVA_OPTS)]


def node_record(node):
    """An openstacksdk node (nova's connection) as the API record the model reads."""
    return {"uuid": node.id, "name": node.name, "resource_class": node.resource_class,
            "provision_state": node.provision_state, "power_state": node.power_state,
            "maintenance": bool(node.is_maintenance), "instance_uuid": node.instance_id,
            "traits": list(node.traits or [])}


def provider_state(node, current_inventory, current_traits):
    """(inventory, traits) for nova's ProviderTree, from rp_reporter's model.

    The same desired() the agent uses; a class change on a node with an
    instance keeps the old class, fully reserved, beside the new one (its
    allocation lives there); only traits rp_reporter added are removed.
    """
    desired = model.desired(model.node_from_api(node_record(node)))
    observed = planner.Observed(
        desired.uuid, 0, current_inventory, frozenset(current_traits),
        # The instance's allocation is on whatever class the node carried.
        usages={rc: 1 for rc in current_inventory} if node.instance_id else {})
    return (planner.target_inventories(desired, observed),
            planner.target_traits(desired, observed.traits), desired)


class IronicDriver(ironic_driver.IronicDriver):
    """nova's Ironic driver; node ownership and provider content from rp_reporter."""

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        self._rp_conf = None
        self.rp_ring = None

    def _reporter_conf(self):
        if self._rp_conf is None:
            files = [CONF.rp_reporter.config_file] if CONF.rp_reporter.config_file else []
            self._rp_conf = rp_conf.load([a for f in files for a in ("--config-file", f)])
            self._rp_conf.set_override("host", CONF.host)
        return self._rp_conf

    def _ring_members(self, ctxt):
        host = CONF.host.lower()
        if CONF.rp_reporter.peers_from == "coordination":
            members, _ = membership.live_members(self._reporter_conf())
            return {m.lower() for m in members} | {host}
        services = objects.ServiceList.get_all_computes_by_hv_type(
            ctxt, self._get_hypervisor_type())
        # A brand-new service has no compute_nodes row yet: always count ourselves.
        return {s.host.lower() for s in services if self.servicegroup_api.service_is_up(s)} | {
            host}

    def _refresh_hash_ring(self, ctxt):
        self.rp_ring = wiring.ring(self._reporter_conf(), self._ring_members(ctxt))
        LOG.debug("ring members: %s", sorted(self.rp_ring.members))

    def _refresh_cache(self):
        ctxt = nova_context.get_admin_context()
        self._refresh_hash_ring(ctxt)
        scope = {}
        if CONF.ironic.conductor_group is not None:
            scope["conductor_group"] = CONF.ironic.conductor_group
        if CONF.ironic.shard:
            scope["shard"] = CONF.ironic.shard
        # Nodes first, instances second: listing thousands of nodes takes time,
        # and an instance list read before it could be stale by the end, which
        # made nova drop (and orphan) nodes it still managed.
        nodes = self._get_node_list(fields=ironic_driver._NODE_FIELDS, **scope)
        instances = set(objects.InstanceList.get_uuids_by_host(ctxt, CONF.host))
        host = CONF.host.lower()
        self.node_cache = {n.id: n for n in nodes if rp_ring.nova_manages(
            n.id, n.instance_id, host, instances, self.rp_ring)}
        self.node_cache_time = time.time()

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        node = self._node_from_cache(nodename)
        current = provider_tree.data(nodename)
        inventory, traits, desired = provider_state(node, dict(current.inventory),
                                                    current.traits)
        if desired.resource_class is None:
            raise exception.NoResourceClass(node=nodename)  # as nova does
        provider_tree.update_inventory(nodename, inventory)
        provider_tree.update_traits(nodename, traits)
