"""A drop-in nova-compute driver: nova's Ironic driver with rp_reporter's provider model.

    [DEFAULT]
    compute_driver = rp_reporter.IronicDriver   # nova.virt.rp_reporter (shims/nova/virt/)
    [rp_reporter]
    peers_from = nova          # or: coordination (the agents' group or peer list)
    config_file = /etc/rp_reporter/rp_reporter.conf   # [coordination] and [ring] from here

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
* ``_refresh_hash_ring``, only with ``peers_from = coordination``: the ring is
  rp_reporter's, over the agents' group (or ``[ring] peer_list``); nova's
  ``_refresh_cache`` then applies it as it applies its own.

nova 34 loads ``compute_driver`` only from ``nova.virt`` (``'nova.virt.%s' %
compute_driver``), so a full dotted path to this module does not load:
rp_reporter installs the one module ``nova/virt/rp_reporter.py``, which
re-exports this class, and nova-compute loads it by its own command with its
own nova.conf; no wrapper command is needed.

This is the only module that imports nova.
"""

import logging

from nova.virt.ironic import driver as ironic_driver
from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import membership
from rp_reporter import model
from rp_reporter import problems as rp_problems
from rp_reporter import wiring
from rp_reporter.sync import plan as planner

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

NOVA_OPTS = [
    cfg.StrOpt("peers_from", default="nova", choices=["nova", "coordination"],
               help="Who owns which node. nova: nova's own code and ring, unchanged "
                    "(every live Ironic compute service, narrowed by [ironic] shard, "
                    "conductor_group and peer_list exactly as nova does). coordination: "
                    "rp_reporter's ring over the members of its [coordination] group (or "
                    "[ring] peer_list) read from config_file; every compute service of a "
                    "group must then switch together."),
    cfg.StrOpt("config_file",
               help="rp_reporter configuration file for [coordination] and [ring]."),
]
CONF.register_opts(NOVA_OPTS, group="rp_reporter")


def list_opts():
    return [("rp_reporter", NOVA_OPTS)]


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

    # Ownership -----------------------------------------------------------

    def _reporter_conf(self):
        if self._rp_conf is None:
            files = [CONF.rp_reporter.config_file] if CONF.rp_reporter.config_file else []
            self._rp_conf = rp_conf.load([a for f in files for a in ("--config-file", f)])
            self._rp_conf.set_override("host", CONF.host)
        return self._rp_conf

    def _refresh_hash_ring(self, ctxt):
        if CONF.rp_reporter.peers_from != "coordination":
            return super()._refresh_hash_ring(ctxt)
        members, _ = membership.live_members(self._reporter_conf())
        members = {m.lower() for m in members} | {CONF.host.lower()}
        # nova's _refresh_cache asks hash_ring.get_nodes(node uuid): a tooz ring.
        self.hash_ring = wiring.ring(self._reporter_conf(), members).hashring
        LOG.debug("rp_reporter ring members: %s", sorted(members))

    # Provider content ----------------------------------------------------

    def update_provider_tree(self, provider_tree, nodename, allocations=None):
        node = self._node_from_cache(nodename)
        unavailable = self._node_resources_unavailable(node)
        used = self._node_resources_used(node)
        info = self._node_resource(node)
        desired = model.provider(
            nodename, info.get("resource_class"), unavailable, used, node.traits or (),
            skip_reserve_in_use=CONF.workarounds.skip_reserve_in_use_ironic_nodes)
        # nova raises NoResourceClass for a node without a class and leaves the old
        # inventory schedulable; the model drops it (kept reserved while allocated).
        self._problems.only(str(nodename), [m for m in (
            desired.refusal, desired.problem and f"offers nothing: {desired.problem}") if m])
        current = provider_tree.data(nodename)
        inventory, traits = provider_content(desired, current.inventory, current.traits, used)
        provider_tree.update_inventory(nodename, inventory)
        provider_tree.update_traits(nodename, traits)
