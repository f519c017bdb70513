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

"""Builds the clients and the sync machinery from configuration.

The CLI, the agent and the nova-compute driver all wire up through here, so
the core modules never read configuration themselves.
"""

import os

from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import conf as rp_conf
from rp_reporter import ring as rp_ring
from rp_reporter import state as rp_state
from rp_reporter.sync import capability_traits
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import node as node_sync
from rp_reporter.sync import placement as placement_sync
from rp_reporter.sync import provider
from rp_reporter.sync import reconcile
from rp_reporter.sync import tenant_aggregates


def check(conf):
    """Raise ValueError, in one line, for configuration that cannot work."""
    groups = list(rp_conf.KSA_SERVICE_TYPES) + (["nova"] if conf.tenancy.enabled else [])
    for group in groups:
        section = conf[group]
        if not section.auth_type and not section.endpoint_override:
            raise ValueError(f"[{group}] needs auth_type (e.g. password, admin_token, none) "
                             f"or endpoint_override")
        if section.auth_type in ("none", "noauth") and not section.endpoint_override:
            raise ValueError(f"[{group}] auth_type = {section.auth_type} needs endpoint_override")
        try:
            rp_conf.adapter(conf, group)
        except ksa_exc.ClientException as e:
            raise ValueError(f"[{group}] {e}") from None


def placement_client(conf, write_guard=None):
    """``write_guard()``, when given, is called before every write (see PlacementClient)."""
    return placement_sync.PlacementClient(
        rp_conf.adapter(conf, "placement"),
        attempts=conf.placement.request_attempts,
        backoff_max=conf.placement.request_backoff_max,
        write_guard=write_guard)


def ironic_client(conf, write_guard=None):
    """``write_guard()``, when given, is called before every node write."""
    return ironic_sync.IronicClient.from_adapter(
        rp_conf.adapter(conf, "ironic"),
        conductor_group=conf.ironic.conductor_group,
        shard=conf.ironic.shard,
        page_size=conf.ironic.page_size,
        write_guard=write_guard)


# What makes two reporters' saved state interchangeable: the same services,
# users and scope.  A state file written under any other is ignored.
IDENTITY_OPTS = ("auth_url", "endpoint_override", "endpoint", "username", "user_id",
                 "project_name", "project_id", "system_scope", "region_name")


def identity(conf):
    """The deployment this reporter serves: its services, users and scope."""
    found = {group: {opt: getattr(conf[group], opt, None) for opt in IDENTITY_OPTS}
             for group in rp_conf.KSA_SERVICE_TYPES}
    found["scope"] = [conf.ironic.conductor_group, conf.ironic.shard]
    return found


def state(conf):
    """The reporter's state file under [DEFAULT] state_path, or in memory when unset."""
    if not conf.state_path:
        return rp_state.InMemory()
    return rp_state.StateFile(os.path.join(conf.state_path, f"rp_reporter-{conf.host}.json"),
                              identity(conf))


def reconciler(conf, owns=None, write_guard=None, owner_guard=None, busy=None):
    """The reconcile pass over the one per-node sync, with its saved observations.

    The agent's ownership plugs in here: ``owns(uuid)``, which nodes are this
    reporter's; ``write_guard()``, called by both clients before every write;
    ``owner_guard(uuid)``, before each write of a node's sync; ``busy(uuid)``,
    whether another sync (the agent's work queue) has that node in hand."""
    provider_sync = provider.ProviderSync(placement_client(conf, write_guard),
                                          conflict_retries=conf.reconcile.conflict_retries,
                                          reverify_passes=conf.reconcile.reverify_passes,
                                          owner_guard=owner_guard,
                                          aggregates=conf.tenancy.enabled)
    nodes = node_sync.NodeSync(ironic_client(conf, write_guard), provider_sync,
                               workers=conf.reconcile.workers,
                               skip_reserve_in_use=conf.reconcile.skip_reserve_in_use, busy=busy)
    nodes.tenancy = node_tenancy(conf)
    if nodes.tenancy is not None:  # the public trait is a derived trait (the agent adds rules)
        nodes.node_traits = capability_traits.NodeTraits(nodes.ironic, None, nodes.tenancy)
    result = reconcile.Reconciler(nodes, workers=conf.reconcile.workers, owns=owns,
                                  bulk_batch=conf.reconcile.bulk_batch, state=state(conf),
                                  absent_for=conf.reconcile.interval,
                                  max_deletion_share=conf.reconcile.max_deletion_share)
    result.restore_observations()
    return result


def node_tenancy(conf):
    """[tenancy] for the per-node sync, or None when it is off."""
    if not conf.tenancy.enabled:
        return None
    return tenant_aggregates.NodeTenancy(
        tenant_aggregates.TenantAggregates(rp_conf.adapter(conf, "nova")),
        rule=conf.tenancy.rule, public_owners=conf.tenancy.public_owners,
        kept=conf.tenancy.kept_aggregates)


def ring(conf, members):
    """The hash ring over these members, as [ring] configures it."""
    return rp_ring.Ring(members, partitions=conf.ring.partitions,
                        hash_function=conf.ring.hash_algorithm)
