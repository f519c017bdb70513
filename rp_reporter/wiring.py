"""Builds the clients and the sync machinery from configuration.

The CLI, the agent and the nova-compute driver all wire up through here, so
the core modules never read configuration themselves.
"""

from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import conf as rp_conf
from rp_reporter import ring as rp_ring
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import placement as placement_sync
from rp_reporter.sync import provider
from rp_reporter.sync import reconcile


def check(conf):
    """Raise ValueError, in one line, for configuration that cannot work."""
    for group in rp_conf.KSA_SERVICE_TYPES:
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


def placement_client(conf):
    return placement_sync.PlacementClient(
        rp_conf.adapter(conf, "placement"),
        attempts=conf.placement.request_attempts,
        backoff_max=conf.placement.request_backoff_max)


def ironic_client(conf):
    return ironic_sync.IronicClient.from_adapter(
        rp_conf.adapter(conf, "ironic"),
        conductor_group=conf.ironic.conductor_group,
        shard=conf.ironic.shard,
        page_size=conf.ironic.page_size)


def reconciler(conf, owns=None):
    syncer = provider.ProviderSync(placement_client(conf),
                                   conflict_retries=conf.reconcile.conflict_retries)
    return reconcile.Reconciler(ironic_client(conf), syncer, workers=conf.reconcile.workers,
                                owns=owns, bulk_batch=conf.reconcile.bulk_batch)


def ring(conf, members):
    """The hash ring over these members, as [ring] configures it."""
    return rp_ring.Ring(members, partitions=conf.ring.partitions,
                        hash_function=conf.ring.hash_algorithm)
