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

"""Provider content: nova's ProviderTree from rp_reporter's model.

The same ``model.provider()`` the agent reaches through ``desired()``, fed with
nova's own answers (``_node_resources_unavailable``, ``_node_resources_used``,
``_node_resource``) and nova's ``[workarounds] skip_reserve_in_use_ironic_nodes``.
Its deliberate differences from nova are listed in doc/source/install/driver.md and in
tests/nova/conformance/deliberate_differences.txt.
"""

import logging

from oslo_config import cfg

from rp_reporter import model
from rp_reporter.sync import plan as planner

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


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


class ProviderContent:
    """``update_provider_tree`` for nova's IronicDriver (a mixin: it calls nova's
    helpers on the driver it is mixed into)."""

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
        self._problems.replace(str(nodename), problems)
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
