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

"""The driver's options in nova.conf, ``[rp_reporter]``."""

from oslo_config import cfg

CONF = cfg.CONF

NOVA_OPTS = [
    cfg.StrOpt("peers_from", default="nova", choices=["nova", "coordination"],
               help="Who owns which node. nova: nova's own code and ring, unchanged "
                    "(every live Ironic compute service, narrowed by [ironic] shard, "
                    "conductor_group and peer_list exactly as nova does). coordination: "
                    "rp_reporter's ring over the live members of a [coordination] group "
                    "that this nova-compute joins under its host (or a static [ring] "
                    "peer_list), read from config_file; every compute service of a group "
                    "must then switch together."),
    cfg.StrOpt("config_file",
               help="rp_reporter configuration file for [coordination] and [ring], and "
                    "[notifications] (or [DEFAULT] transport_url): the bus Ironic's versioned "
                    "notifications arrive on, where full_pass_every is above 1 (a node "
                    "deleted in Ironic then leaves nova's node cache at the next refresh, "
                    "not at the next whole listing)."),
    cfg.BoolOpt("rehome", default=True,
                help="With peers_from = coordination and a [coordination] backend: move "
                     "to a live member the servers of a compute service that is fenced "
                     "(its lease gone and nova reporting it down), forcing it down first. "
                     "False: nobody moves them; an operator does, with nova-manage db "
                     "ironic_compute_node_move."),
    cfg.IntOpt("orphaned_nodes_interval", default=600, min=0,
               help="With peers_from = coordination: every this many seconds, each service "
                    "looks at the deployed Ironic nodes its ring gives it for one whose "
                    "server nova deleted (a delete while the server's compute service was "
                    "down is a local delete in nova: Ironic keeps the node deployed for "
                    "ever), logs each once and sets rp_reporter_orphaned_nodes. 0: never."),
    cfg.IntOpt("orphaned_nodes_grace", default=3600, min=0,
               help="A node is orphaned once nova deleted its server this many seconds ago "
                    "(nova's own reaper, running_deleted_instance_action, acts first on a "
                    "server's host that is up)."),
    cfg.BoolOpt("undeploy_orphaned_nodes", default=False,
                help="Undeploy each orphaned node (Ironic's provision state 'deleted': "
                     "its cleaning, then available), after reading it and nova's record "
                     "of its server again. Off: only said and counted."),
    cfg.IntOpt("full_pass_every", default=1, min=1,
               help="Which nodes nova's resource-tracker periodic (update_available_resource) "
                    "goes over. 1: every node, every periodic (nova's behaviour). N above 1, "
                    "where rp_reporter's agents keep every node's provider right: a node "
                    "new to this service (every node at its start), one whose fields nova "
                    "reads changed in Ironic since nova's last look, one the driver spawned "
                    "a server on or destroyed one on, and one nova has not looked at for "
                    "N - 1/2 update_resources_interval (every node at least once in N "
                    "periodics); when none is due, the one nova looked at least recently. "
                    "At 1,000 nodes per service a periodic then takes seconds instead of "
                    "about a minute (doc/source/contributor/performance.md). Size N by "
                    "the service's share: nova's look at every node (0.2-0.3 s a node) "
                    "should take a small part "
                    "of N intervals, so 10 up to about 1,000 nodes a service, 60 at 3,300."),
    cfg.IntOpt("listing_failures_alert", default=3, min=1,
               help="With full_pass_every above 1: after this many whole listings of the "
                    "fleet failed in a row (each retried after 10 s, doubled at each "
                    "failure, up to a full pass), the driver's metric "
                    "rp_reporter_whole_listing_failing is 1 until one succeeds. Meanwhile "
                    "nova's periodic looks at no node for its age; a node deleted or moved "
                    "out of this service's scope still never reaches it."),
    cfg.StrOpt("metrics_bind", default="",
               help="host:port where this nova-compute serves rp_reporter's driver metrics "
                    "(/metrics: re-homing moves, fences, refusals and failures, operations "
                    "refused) and /healthz (200 while a live member of the coordination "
                    "group). Empty: not served."),
]
CONF.register_opts(NOVA_OPTS, group="rp_reporter")


def list_opts():
    return [("rp_reporter", NOVA_OPTS)]
