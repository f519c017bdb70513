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

"""Prometheus metrics and the /healthz + /metrics endpoint of the agent."""

import threading
import wsgiref.simple_server
from socketserver import ThreadingMixIn

import prometheus_client as prom

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10, 30)


# attribute: (kind, metric name, help, labels).  Counters are exported with
# Prometheus's _total suffix.
METRICS = {
    "queue_depth": (prom.Gauge, "rp_reporter_queue_depth", "Nodes waiting to be synced.", ()),
    "writes": (prom.Counter, "rp_reporter_placement_writes", "Placement writes, by kind.",
               ("kind",)),
    "conflicts": (prom.Counter, "rp_reporter_generation_conflicts",
                  "Writes refused for a stale generation, re-planned.", ()),
    "node_syncs": (prom.Counter, "rp_reporter_node_syncs",
                   "Per-node syncs by what they synced from: ironic (a read of the node: a "
                   "notification, a takeover, a retry) or listing (a reconcile pass's listing "
                   "of a node nothing happened to since).", ("read",)),
    "failures": (prom.Counter, "rp_reporter_sync_failures",
                 "Per-node syncs that failed, by reason.", ("reason",)),
    "notifications": (prom.Counter, "rp_reporter_notifications",
                      "Notifications received, by result.", ("result",)),
    "nodes_owned": (prom.Gauge, "rp_reporter_nodes_owned",
                    "Nodes this agent is responsible for.", ()),
    "nodes_skipped": (prom.Gauge, "rp_reporter_nodes_skipped",
                      "Owned nodes that offer nothing (no or bad resource class, unreadable "
                      "record); each is logged once.", ()),
    "reconcile_seconds": (prom.Gauge, "rp_reporter_last_reconcile_seconds",
                          "Duration of the last reconcile pass, its bulk creation included.",
                          ()),
    "reconciling": (prom.Gauge, "rp_reporter_reconcile_running",
                    "1 while a reconcile pass runs.", ()),
    "reconcile_passes": (prom.Counter, "rp_reporter_reconcile_passes",
                         "Reconcile passes finished (a pass that could not run is not "
                         "counted).", ()),
    "listings": (prom.Counter, "rp_reporter_reconcile_listings",
                 "Reconcile passes by where their bulk observation came from: own (this "
                 "agent listed Ironic and Placement), shared (the lister's slice), sent (this "
                 "agent listed and sent the other members their slices).", ("source",)),
    "reconcile_drift": (prom.Gauge, "rp_reporter_last_reconcile_drift",
                        "Nodes the last reconcile found out of step.", ()),
    "deletions_refused": (prom.Counter, "rp_reporter_deletions_refused",
                          "Reconcile passes whose deletions the guard refused, by reason "
                          "(unproven_listing, none_visible, mass_disappearance).", ("reason",)),
    "providers_absent": (prom.Gauge, "rp_reporter_providers_absent",
                         "Managed providers whose nodes the last pass did not see (deleted "
                         "once a pass an interval later still does not, unless the guard "
                         "refuses).", ()),
    "listing_dropped": (prom.Counter, "rp_reporter_listing_messages_dropped",
                        "Shared-listing messages a member did not keep (malformed, out of "
                        "bounds, unsigned or signed with no key of the group, not from the "
                        "ring's lister), by kind (page, end).", ("kind",)),
    "listing_casts_failed": (prom.Counter, "rp_reporter_listing_casts_failed",
                             "Members this lister could not send a listing to (a cast failed "
                             "or the send queue was full): they listed by themselves.", ()),
    "threads_restarted": (prom.Counter, "rp_reporter_threads_restarted",
                          "Agent threads that died and were started again, by role "
                          "(membership, fencing, sync).", ("thread",)),
    # Read at each scrape (the agent sets their functions): what /healthz says, as
    # numbers an alert can use.
    "healthy": (prom.Gauge, "rp_reporter_healthy",
                "1 when /healthz answers 200, else 0 (starting, fenced, a dependency down or "
                "refusing, a thread died, the deletion guard refusing).", ()),
    "fenced": (prom.Gauge, "rp_reporter_fenced",
               "1 while this agent's membership lease lapsed: it writes nothing until it is "
               "a member again.", ()),
    "dependency_up": (prom.Gauge, "rp_reporter_dependency_up",
                      "0 while calls to the dependency fail (outage, refused permission, "
                      "misconfiguration), else 1.", ("dependency",)),
}


class Metrics:
    def __init__(self):
        self.registry = prom.CollectorRegistry()
        for attribute, (kind, name, doc, labels) in METRICS.items():
            setattr(self, attribute, kind(name, doc, labels, registry=self.registry))
        self.event_to_write = prom.Histogram(
            "rp_reporter_event_to_write_seconds",
            "From an Ironic notification being sent to Placement matching it.",
            buckets=LATENCY_BUCKETS, registry=self.registry)

    def record_sync(self, result):
        for op in result.ops:
            self.writes.labels(op.kind).inc()
        if result.outcome.value == "deleted":
            self.writes.labels("delete").inc()
        if result.attempts > 1:
            self.conflicts.inc(result.attempts - 1)


class _ThreadingWSGIServer(ThreadingMixIn, wsgiref.simple_server.WSGIServer):
    daemon_threads = True


class _QuietHandler(wsgiref.simple_server.WSGIRequestHandler):
    def log_message(self, *args):  # scrapes are not news
        pass


def serve(metrics, healthy, bind):
    """Serve /healthz (200 when ``healthy()``, else 503) and /metrics on "host:port"."""
    metrics_app = prom.make_wsgi_app(metrics.registry)

    def app(environ, start_response):
        if environ.get("PATH_INFO") == "/healthz":
            ok, detail = healthy()
            start_response("200 OK" if ok else "503 Service Unavailable",
                           [("Content-Type", "text/plain")])
            return [detail.encode()]
        return metrics_app(environ, start_response)

    host, _, port = bind.rpartition(":")
    server = wsgiref.simple_server.make_server(host.strip("[]") or "127.0.0.1", int(port), app,
                                               _ThreadingWSGIServer, _QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
