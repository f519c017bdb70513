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

"""Configuration: every option rp_reporter reads, in one place.

``list_opts()`` feeds oslo-config-generator (``tox -e genconfig``), which
writes ``etc/rp_reporter/rp_reporter.conf.sample``.
"""

import copy
import socket

from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from oslo_config import cfg

from rp_reporter import log as rp_log
from rp_reporter import version

CONF = cfg.CONF

DEFAULT_OPTS = [
    cfg.StrOpt("host", default=socket.gethostname(), sample_default="<hostname>",
               help="Name of this reporter: its identity on the hash ring and in logs."),
    cfg.StrOpt("state_path",
               help="Directory for what must survive the process (the absences earlier "
                    "passes saw, so a provider is deleted only when its node is missing "
                    "from listings an interval apart). Unset: kept in memory, so the "
                    "agent deletes from its second pass on and a one-shot `reconcile` "
                    "never deletes."),
]

IRONIC_OPTS = [
    cfg.StrOpt("conductor_group",
               help="Report only nodes in this Ironic conductor group (as nova's "
                    "[ironic] conductor_group)."),
    cfg.StrOpt("shard",
               help="Report only nodes in this Ironic shard (as nova's [ironic] shard; "
                    "needs Ironic API 1.82)."),
    cfg.IntOpt("page_size", default=1000, min=1,
               help="Nodes per page when listing Ironic nodes."),
]

PLACEMENT_OPTS = [
    cfg.IntOpt("request_attempts", default=5, min=1,
               help="Attempts for one Placement request that fails with a connection "
                    "error or a 5xx answer, with jittered exponential backoff."),
    cfg.FloatOpt("request_backoff_max", default=4.0, min=0,
                 help="Longest pause, in seconds, between two attempts of one request."),
]

RECONCILE_OPTS = [
    cfg.IntOpt("workers", default=8, min=1,
               help="Concurrent Placement writers during a reconcile."),
    cfg.IntOpt("conflict_retries", default=5, min=0,
               help="How often one provider is re-read and re-planned after a "
                    "generation conflict before that node counts as failed."),
    cfg.IntOpt("bulk_batch", default=100, min=0,
               help="New providers get their inventories this many at a time through "
                    "one POST /reshaper each (all or nothing; a refused batch goes node "
                    "by node). Needs the service role (as nova's Placement user has); "
                    "0 disables it."),
    cfg.IntOpt("interval", default=600, min=1, mutable=True,
               help="Seconds between two reconcile passes of the agent; also how long a "
                    "node must stay absent from Ironic's listing (seen by two passes at "
                    "least this far apart) before its provider is deleted."),
    cfg.BoolOpt("skip_reserve_in_use", default=False,
                help="A node with an instance that is otherwise usable (available, not "
                     "in maintenance, power state known) is not reserved: nova's "
                     "[workarounds] skip_reserve_in_use_ironic_nodes, for Ironic without "
                     "automated cleaning. Set both alike."),
    cfg.IntOpt("reverify_passes", default=64, min=1,
               help="Every cached observation of a provider is read again at least once "
                    "every this many passes (a share of 1/N of them each pass), so a wrong "
                    "entry the generation cannot show (a provider deleted and created again "
                    "with the same uuid) lasts at most N passes. 1: no observation is "
                    "trusted across passes."),
    cfg.FloatOpt("max_deletion_share", default=0.02, min=0, max=1,
                 help="Largest share of the managed providers in scope one pass may "
                      "delete (always at least one). A pass whose absent nodes exceed it, "
                      "or where Ironic shows none of the nodes Placement holds, deletes "
                      "nothing and reports it (/healthz, metric, exit status); "
                      "`rp-reporter reconcile --allow-mass-deletion` lets a real "
                      "decommission through."),
    cfg.FloatOpt("jitter", default=0.1, min=0, max=1, mutable=True,
                 help="Each wait of the agent is interval * (1 +/- jitter), so agents "
                      "drift apart."),
    cfg.BoolOpt("share_listing", default=True,
                help="Agents on one ring list Ironic and Placement once per interval for "
                     "all of them, not once each: the ring's owner of a fixed key (the "
                     "lister) lists both and casts every other member its slice over "
                     "[notifications] transport_url (topic rp_reporter_listing.<group>); "
                     "each member runs its pass on its slice. A member with no whole, "
                     "fresh slice on its own ring lists by itself. Needs transport_url, "
                     "shared_listing_keys and a ring of more than one member; otherwise "
                     "every agent lists."),
    cfg.ListOpt("shared_listing_keys", default=[], secret=True,
                help="Secrets the shared listing's messages are signed with (HMAC-SHA256), "
                     "the same on every agent of the group: the first signs, any verifies, "
                     "so a key is rotated by adding the new one second everywhere, then "
                     "moving it first, then dropping the old one. A member keeps only "
                     "messages signed with one of them and sent by its ring's lister. "
                     "Empty: no listing is shared (every agent lists by itself)."),
    cfg.FloatOpt("shared_listing_wait", default=30.0, min=0,
                 help="Seconds past its own interval a member waits for the lister's "
                      "slice before it lists by itself (at least twice the lister's last "
                      "listing time, so a large fleet's slow listing is waited for); also "
                      "how long it waits for the lister's listing after the ring "
                      "changed. While the lister's pages come at least this often, a "
                      "member waits on, up to shared_listing_wait_max."),
    cfg.FloatOpt("shared_listing_wait_max", min=0,
                 help="Longest a member waits past its interval for the lister's slice, "
                      "whatever the lister's listing takes; then it lists by itself (and "
                      "says so). Default: one interval."),
]

NOTIFICATIONS_OPTS = [
    cfg.StrOpt("transport_url", secret=True,
               help="oslo.messaging transport URL of the bus Ironic sends its versioned "
                    "notifications to (e.g. rabbit://user:pass@host:5672/), for this "
                    "agent alone: it overrides [DEFAULT] transport_url, the bus as every "
                    "service has it (with [oslo_messaging_rabbit] for quorum queues and "
                    "TLS). Empty: no bus, whatever [DEFAULT] says. With neither set, the "
                    "agent runs the reconcile loop only."),
    cfg.StrOpt("topic", default="ironic_versioned_notifications",
               help="Ironic's [DEFAULT] versioned_notifications_topics."),
    cfg.StrOpt("exchange", default="ironic",
               help="The exchange Ironic publishes on (its control_exchange)."),
    cfg.StrOpt("pool", sample_default="rp_reporter.<host>",
               help="Listener pool (queue) name; every agent needs its own so agents do "
                    "not split the messages between them. Default: rp_reporter.<host>."),
]

AGENT_OPTS = [
    cfg.StrOpt("metrics_bind", default="127.0.0.1:9464",
               help="host:port serving /healthz and Prometheus /metrics (loopback by "
                    "default; empty disables it)."),
    cfg.IntOpt("workers", default=8, min=1,
               help="Concurrent per-node syncs of the agent's work queue."),
    cfg.FloatOpt("retry_backoff_max", default=30.0, min=0.1, deprecated_name="retry_max",
                 help="Longest backoff, in seconds, before a failed node sync is retried "
                      "(named as [placement] request_backoff_max)."),
]

COORDINATION_OPTS = [
    cfg.StrOpt("backend_url", secret=True,
               help="tooz URL of the group the agents join: redis://, etcd3+http://, "
                    "zookeeper://, kubernetes://, or file://DIR on one machine. Unset (and "
                    "no [ring] peer_list): this agent is alone and owns every node."),
    cfg.StrOpt("group", default="rp_reporter",
               help="Group name; agents in one group share the nodes."),
    cfg.FloatOpt("heartbeat", default=1.0, min=0.1,
                 help="Seconds between membership renewals."),
    cfg.FloatOpt("lease", default=10.0, min=1.0,
                 help="Seconds without renewal after which a member is dropped (and after "
                      "which, less one heartbeat, it stops writing)."),
]

RING_OPTS = [
    cfg.IntOpt("partitions", default=1024, min=1,
               help="Hash ring partitions per member (more: better balance)."),
    cfg.StrOpt("hash_algorithm", default="sha256",
               help="hashlib algorithm of the ring (sha256 works under FIPS)."),
    cfg.ListOpt("peer_list", default=[],
                help="Static ring members (hosts), used when no [coordination] "
                     "backend_url is set. This agent's host is always a member."),
]

TRAITS_OPTS = [
    cfg.StrOpt("rules_file", mutable=True,
               help="YAML rule file mapping node capabilities and properties to traits "
                    "(etc/rp_reporter/capability-rules.yaml). Set: the agent keeps each "
                    "node's derived traits in step on every change, adding what the rules "
                    "derive and removing only traits it derived and recorded in the node's "
                    "extra/rp_reporter_derived_traits. Unset: the agent leaves capabilities "
                    "alone, and `rp-reporter traits from-capabilities` uses the built-in "
                    "rules."),
]

TENANCY_OPTS = [
    cfg.BoolOpt("enabled", default=False,
                help="Tell nova's scheduler who may deploy on each node (Ironic's owner and "
                     "lessee): each node's provider goes in a nova aggregate per project "
                     "that may deploy on it (made through [nova], metadata filter_tenant_id), "
                     "and a node nobody claims carries the Ironic trait "
                     "CUSTOM_BAREMETAL_PUBLIC. Needs nova's [scheduler] "
                     "limit_tenants_to_placement_aggregate = True and flavors that require "
                     "or forbid the trait (doc/source/admin/tenancy.md)."),
    cfg.StrOpt("rule", default="lessee_else_owner",
               choices=[("lessee_else_owner", "the lessee where there is one, else the owner"),
                        ("owner_or_lessee", "both, as Ironic's own API allows")],
               help="Which projects may deploy on a node. Ironic's automatic lessee (set "
                    "from the server's project at deploy) never counts."),
    cfg.ListOpt("public_owners", default=[],
                help="Owner projects whose nodes count as public (the operator's own)."),
    cfg.ListOpt("kept_aggregates", default=[],
                help="Aggregate uuids every node's provider is kept in beside its tenant "
                     "aggregates: the compute hosts' availability-zone aggregates (nova "
                     "mirrors only a host's first node into Placement)."),
]

GROUP_OPTS = {
    None: DEFAULT_OPTS,
    "ironic": IRONIC_OPTS,
    "placement": PLACEMENT_OPTS,
    "reconcile": RECONCILE_OPTS,
    "notifications": NOTIFICATIONS_OPTS,
    "agent": AGENT_OPTS,
    "coordination": COORDINATION_OPTS,
    "ring": RING_OPTS,
    "traits": TRAITS_OPTS,
    "tenancy": TENANCY_OPTS,
}

# keystoneauth1 options (auth, session, adapter) for each service we call,
# so the local stack (admin_token / none) and Keystone in production
# (password) are both plain configuration.
KSA_SERVICE_TYPES = {"ironic": "baremetal", "placement": "placement"}
# Those called only when an option asks for them: nova's API for [tenancy].
OPTIONAL_KSA_SERVICE_TYPES = {"nova": "compute"}
ALL_KSA_SERVICE_TYPES = {**KSA_SERVICE_TYPES, **OPTIONAL_KSA_SERVICE_TYPES}


def register_opts(conf=CONF):
    rp_log.register_options(conf)  # debug, log_file, use_json, use_journal, ... (oslo.log)
    for group, opts in GROUP_OPTS.items():
        conf.register_opts(opts, group=group)
    for group, service_type in ALL_KSA_SERVICE_TYPES.items():
        ks_loading.register_session_conf_options(conf, group)
        ks_loading.register_auth_conf_options(conf, group)
        ks_loading.register_adapter_conf_options(conf, group)
        conf.set_default("service_type", service_type, group=group)
        conf.set_default("valid_interfaces", ["internal", "public"], group=group)


def _ksa_opts(service_type):
    opts = (ks_loading.get_session_conf_options()
            + ks_loading.get_auth_common_conf_options()
            + ks_loading.get_auth_plugin_conf_options("password")
            + ks_loading.get_auth_plugin_conf_options("v3password")
            + ks_loading.get_auth_plugin_conf_options("admin_token")
            + ks_loading.get_adapter_conf_options(include_deprecated=False))
    unique = {}
    for opt in opts:
        unique.setdefault(opt.dest, opt)
    # The sample shows the defaults register_opts() sets (copies: keystoneauth1
    # hands out its own option objects).
    defaults = {"service_type": service_type, "valid_interfaces": ["internal", "public"]}
    opts = []
    for opt in unique.values():
        if opt.dest in defaults:
            opt = copy.copy(opt)
            opt.default = defaults[opt.dest]
        opts.append(opt)
    return opts


def list_opts():
    """All options by group, for oslo-config-generator."""
    groups = {"DEFAULT" if g is None else g: list(opts) for g, opts in GROUP_OPTS.items()}
    for group, service_type in ALL_KSA_SERVICE_TYPES.items():
        groups.setdefault(group, [])
        groups[group] += _ksa_opts(service_type)
    return list(groups.items())


def load(argv, conf=None):
    """Parse argv (``--config-file`` and friends) into a fresh ConfigOpts."""
    conf = conf or cfg.ConfigOpts()
    register_opts(conf)
    conf(argv, project="rp_reporter", version=version.version_info.version_string())
    return conf


def bus_url(conf):
    """The transport URL of the agent's bus (Ironic's notifications and the shared
    listing): ``[notifications] transport_url``, else ``[DEFAULT] transport_url`` where
    the configuration sets it; None: no bus.  Registers oslo.messaging's options on
    ``conf`` first (only now: oslo.messaging is heavy), as a service does, so
    ``[DEFAULT] transport_url`` and ``[oslo_messaging_rabbit]`` are read from its files
    (ValueError: they do not go together)."""
    from oslo_concurrency import lockutils
    from oslo_concurrency import opts as concurrency_opts
    from oslo_messaging import opts as messaging_opts

    for group, opts in [*messaging_opts.list_opts(), *concurrency_opts.list_opts()]:
        conf.register_opts(opts, group=group)
    # oslo.messaging's queue manager names its queues under a lock of lockutils, which
    # reads its own (global) configuration: [oslo_concurrency] lock_path is passed on.
    if conf.oslo_concurrency.lock_path:
        lockutils.CONF.set_override("lock_path", conf.oslo_concurrency.lock_path,
                                    group="oslo_concurrency")
    elif conf.oslo_messaging_rabbit.use_queue_manager:
        raise ValueError("[oslo_messaging_rabbit] use_queue_manager needs [oslo_concurrency] "
                         "lock_path (the queue manager counts its queues under a lock)")
    if conf.notifications.transport_url is not None:
        return conf.notifications.transport_url or None
    # oslo.messaging's default (rabbit:// on localhost) is no bus here: the bus is
    # optional, so only a transport_url the configuration names is used.
    unset = (cfg.Locations.opt_default, cfg.Locations.set_default)
    if conf.get_location("transport_url").location in unset:
        return None
    return conf.transport_url or None


def adapter(conf, group):
    """A keystoneauth1 Adapter for one service, built from its section."""
    auth = ks_loading.load_auth_from_conf_options(conf, group)
    session = ks_loading.load_session_from_conf_options(conf, group, auth=auth)
    # A connection for every thread that may call the service at once (the
    # agent's queue workers beside a reconcile's); requests keeps 10 per host
    # and closes the rest after each call ("Connection pool is full").
    pool = conf.agent.workers + conf.reconcile.workers
    for prefix in ("https://", "http://"):
        session.session.mount(prefix, ks_session.TCPKeepAliveAdapter(pool_maxsize=pool))
    return ks_loading.load_adapter_from_conf_options(conf, group, session=session, auth=auth)
