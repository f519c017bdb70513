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

"""changes-listing: what nova's node refresh asks of Ironic while the fleet is busy.

    tox -e bench -- changes-listing --nodes 1000      (not in CI)

With ``[rp_reporter] full_pass_every`` above 1, the driver's node refresh lists only
the nodes Ironic wrote since its last listing, every field of each (Ironic's list
carries the time stamps only then), where nova's own lists the whole fleet with the
fields nova reads.  During a mass deploy or cleaning every lock, state and heartbeat is
a write, so that listing can come to more than nova's.  This measures both at each
refresh, on one stack of the kind the run measures (MariaDB by default):

* ``--nodes`` nodes, the first TEMPLATES through Ironic's API and made available, the
  rest copies of their rows (``common.copy_nodes``); none of this is measured;
* three phases one after another, each at least ``--intervals`` intervals and until
  its writes are over: quiet (nothing written), deploy (every node, or ``--busy`` of
  them, deployed eight at a time: its instance set, then provision state active) and
  cleaning (the same nodes undeployed with automated cleaning on, eight at a time);
* every ``--interval`` seconds, the driver's listing (its ``NodeListing``, the whole
  listing beside nova's periodic left out, so that each refresh lists what changed,
  or the whole fleet where that costs more) and nova's own (openstacksdk's node list
  with nova's fields, the request nova's ``_get_node_list`` makes), each through an
  openstacksdk baremetal proxy of its own: their requests and answer bytes.

Saves bench-results/changes-listing.json: each refresh, and per phase the mean and the
most of each figure per interval.
"""

import concurrent.futures
import time
import uuid

import openstack
import prometheus_client as prom

from tools import clients
from tools.bench import common

PHASES = ("quiet", "deploy", "cleaning")
# nova's _NODE_FIELDS under Ironic's names (nova's _get_node_list renames two)
NOVA_FIELDS = ("uuid", "power_state", "target_power_state", "provision_state",
               "target_provision_state", "last_error", "maintenance", "properties",
               "instance_uuid", "traits", "resource_class")


def add_arguments(parser):
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=10,
                        help="seconds between node refreshes (nova's periodic; a build's "
                             "refresh comes between them too)")
    parser.add_argument("--intervals", type=int, default=3,
                        help="the shortest phase, in intervals")
    parser.add_argument("--busy", type=int,
                        help="how many nodes the deploy and the cleaning take (default: all)")


class Counted:
    """An openstacksdk baremetal proxy whose GETs are counted: requests, answer bytes."""

    def __init__(self, url):
        self.proxy = openstack.connection.Connection(
            auth_type="none", baremetal_endpoint_override=url + "/v1").baremetal
        self.requests = self.bytes = 0
        get = self.proxy.get

        def counted(*args, **kwargs):
            response = get(*args, **kwargs)
            self.requests += 1
            self.bytes += len(response.content)
            return response
        self.proxy.get = counted  # openstacksdk's listing calls its session's get too

    def taken(self):
        """(requests, bytes) since the last call."""
        figures = (self.requests, self.bytes)
        self.requests = self.bytes = 0
        return figures


def refresh(ours, listing, stock):
    """One refresh of each: {ours_*, stock_*} figures."""
    fulls = listing.view.full_at
    nodes = listing.nodes(NOVA_FIELDS)
    ours_requests, ours_bytes = ours.taken()
    listed = list(stock.proxy.nodes(fields=NOVA_FIELDS))
    stock_requests, stock_bytes = stock.taken()
    assert len(listed) == len(nodes), (len(listed), len(nodes))
    return {"ours_requests": ours_requests, "ours_bytes": ours_bytes,
            "ours_whole": listing.view.full_at != fulls,
            "stock_requests": stock_requests, "stock_bytes": stock_bytes}


def deploy(ironic, node):
    ironic.patch(node, instance_uuid=str(uuid.uuid4()))
    ironic.provision(node, "active", "active")


def clean(ironic, node):
    ironic.patch(node, automated_clean=True)  # the conductor's option is off here
    ironic.provision(node, "deleted", "available")


def work_on(ironic, nodes, operation):
    """``operation(ironic, node)`` for every node, eight at a time, on a thread: its
    future."""
    pool = concurrent.futures.ThreadPoolExecutor(8)

    def every():
        list(pool.map(lambda node: operation(ironic, node), nodes))
    return pool.submit(every)


def run(args):
    from rp_reporter import fleet_listing
    from rp_reporter.nova_compute import node_listing  # nova's environment (tox -e bench)
    stack = common.new_stack()
    try:
        common.start(stack, ["rabbitmq", "ironic"])
        ironic = clients.Ironic(stack.ironic_url, "changes-listing")
        templates = common.load_nodes(ironic, min(args.nodes, common.TEMPLATES))
        for node in templates:
            ironic.provision(node, "manage", "manageable")
            ironic.provision(node, "provide", "available")
        nodes = templates + [node for node, _ in common.copy_nodes(
            stack, templates, args.nodes - len(templates))]
        ours, stock = Counted(stack.ironic_url), Counted(stack.ironic_url)
        listing = node_listing.NodeListing(
            lambda: ours.proxy, float("inf"),
            prom.Counter("requests", "", ("listing",), registry=prom.CollectorRegistry()))
        refreshes = []
        # nodes written in the last minute are listed as written since (the listings'
        # slack for clocks): the fleet just made is let age past it first
        time.sleep(fleet_listing.SLACK_S + 5)
        listing.nodes(NOVA_FIELDS)  # the start's whole listing
        ours.taken()
        busy = nodes[:args.busy or len(nodes)]
        for phase, operation in zip(PHASES, (None, deploy, clean), strict=True):
            work = operation and work_on(ironic, busy, operation)
            started = time.monotonic()
            while (time.monotonic() - started < args.intervals * args.interval
                   or (work and not work.done())):
                time.sleep(args.interval)
                refreshes.append({"phase": phase, **refresh(ours, listing, stock)})
                print(phase, refreshes[-1], flush=True)
            if work:
                work.result()
        results = {"nodes": args.nodes, "busy": len(busy), "interval_s": args.interval,
                   "database": common.DATABASE, "load": common.load(),
                   "phases": summary(refreshes), "refreshes": refreshes}
        common.save(results, "changes-listing")
        return results
    finally:
        stack.stop()


def summary(refreshes):
    """Per phase: the mean and the most per interval of each figure, and how many
    refreshes of ours listed the whole fleet."""
    phases = {}
    for phase in PHASES:
        rows = [row for row in refreshes if row["phase"] == phase]
        if not rows:
            continue
        figures = {"refreshes": len(rows),
                   "ours_listed_whole": sum(row["ours_whole"] for row in rows)}
        for key in ("ours_requests", "ours_bytes", "stock_requests", "stock_bytes"):
            values = [row[key] for row in rows]
            figures[f"{key}_mean"] = round(sum(values) / len(values), 1)
            figures[f"{key}_max"] = max(values)
        phases[phase] = figures
    return phases

