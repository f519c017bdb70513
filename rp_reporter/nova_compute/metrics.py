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

"""The driver's own Prometheus metrics, served on ``[rp_reporter] metrics_bind``."""

import prometheus_client as prom

from rp_reporter import metrics as rp_metrics


class DriverMetrics:
    def __init__(self):
        self.registry = prom.CollectorRegistry()
        self.rehoming = prom.Counter(
            "rp_reporter_rehoming",
            "Re-homing of fenced compute services' servers, by outcome: moved; fenced (a "
            "service forced down before its servers moved); refused (left for an operator: "
            "another shard, another server on the node in Ironic); lost (another mover moved "
            "or claimed the server first; nothing written); failed (tried again at the "
            "next round).", ("outcome",), registry=self.registry)
        self.refused = prom.Counter(
            "rp_reporter_operations_refused",
            "Operations on a server this service refused: nova homes it elsewhere now, or "
            "this service is forced down.", ("operation",), registry=self.registry)
        self.renewal_late = prom.Histogram(
            "rp_reporter_membership_renewal_late_seconds",
            "How late each renewal of this service's membership started, past its "
            "heartbeat: nova's work holding the process (under eventlet, a stretch that "
            "never yields) delays it; past the lease the service is fenced.",
            buckets=(0.1, 0.5, 1, 2, 3, 5, 10, 30), registry=self.registry)
        self.node_list_requests = prom.Counter(
            "rp_reporter_ironic_node_list_requests",
            "Requests for pages of Ironic's node list made for nova's node refresh with "
            "full_pass_every above 1, by listing: full (the whole fleet, once a full pass), "
            "changes (the nodes written since the last listing) or check (before nova's "
            "periodic looks at nodes its own listing did not hold: the uuids of the "
            "service's scope, or one read a node where fewer need it).", ("listing",),
            registry=self.registry)
        self.whole_listing_failing = prom.Gauge(
            "rp_reporter_whole_listing_failing",
            "1 while the whole listings of the fleet made for nova's node refresh (with "
            "full_pass_every above 1) have failed [rp_reporter] listing_failures_alert "
            "times in a row: nova's periodic then looks at no node for its age.",
            registry=self.registry)

        self.orphaned_nodes = prom.Gauge(
            "rp_reporter_orphaned_nodes",
            "Deployed Ironic nodes of this service's ring whose server nova deleted more "
            "than [rp_reporter] orphaned_nodes_grace ago: nothing owns them (at the last "
            "look).", registry=self.registry)
        self.orphaned_undeployed = prom.Counter(
            "rp_reporter_orphaned_nodes_undeployed",
            "Orphaned nodes undeployed ([rp_reporter] undeploy_orphaned_nodes).",
            registry=self.registry)

    def serve(self, bind, member):
        """/metrics, and /healthz: 200 while ``member()`` (a live member of the group)."""
        return rp_metrics.serve(self, lambda: (member(), "member\n" if member() else
                                               "not a live member of the group\n"), bind)
