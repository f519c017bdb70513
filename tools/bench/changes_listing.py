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

"""changes-listing: what nova's node refresh and periodic ask of Ironic, fleet busy or not.

    tox -e bench -- changes-listing --nodes 1000      (not in CI)
    tox -e bench -- changes-listing --nodes 10000 --phases quiet

With ``[rp_reporter] full_pass_every`` above 1, the driver's node refresh lists only
the nodes Ironic wrote since its last listing, every field of each (Ironic's list
carries the time stamps only then), where nova's own lists the whole fleet with the
fields nova reads; its periodic checks the nodes due that no listing held since nova's
last look against Ironic's listing of the scope (``in_scope``), and a whole listing runs
beside the periodic once a full pass.  During a mass deploy or cleaning every lock,
state and agent heartbeat is a write, so the listing of what changed can come to more
than nova's.  This counts every request of both at each periodic, on one stack of the
kind the run measures (MariaDB by default):

* ``--nodes`` nodes, the first TEMPLATES through Ironic's API and made available, the
  rest copies of their rows (``common.copy_nodes``); none of this is measured;
* the phases of ``--phases`` one after another, each a full pass and more (``--intervals``
  periodics, at least ``--full-pass-every`` + 1: the nodes fall due for their age and are
  checked) and until its writes are over: quiet (nothing written), deploy (every node,
  or ``--busy`` of them, deployed eight at a time: its instance set, then provision state
  active) and cleaning (the same nodes undeployed with automated cleaning on, eight at a
  time);
* the agent's heartbeats: fake-hardware has no agent, so from its deploy or cleaning
  each busy node is written as Ironic writes it at a heartbeat (a field of the node saved;
  here ``extra``) for ``--in-ramdisk`` seconds, every 0.3 to 0.6 of ``--heartbeat-timeout``
  (ironic-python-agent's spacing; 300 s is Ironic's default), where a real node's agent
  heartbeats through its whole deploy or cleaning;
* every ``--interval`` seconds, nova's periodic as the driver runs it (its ``NodeListing``
  and ``PeriodicNodes``: the refresh, the check of the nodes due, nova's look at each node
  handed to it; the whole listing beside it on its own thread) and nova's own listing
  (openstacksdk's node list with nova's fields, the request nova's ``_get_node_list``
  makes), each through an openstacksdk baremetal proxy of its own: every request and its
  answer's bytes, ours by kind (``changes``, ``check``, ``full``).

Saves bench-results/changes-listing.json (``--nodes`` other than 1000:
changes-listing-<nodes>.json): each periodic, and per phase the mean and the most of
each figure per periodic (``requests_per_periodic``: every request of ours).
"""

import concurrent.futures
import heapq
import random
import threading
import time
import uuid

import openstack
import prometheus_client as prom

from tools import clients
from tools.bench import common

PHASES = ("quiet", "deploy", "cleaning")
KINDS = ("changes", "check", "full")  # NodeListing's requests, by its counter's label
# nova's _NODE_FIELDS under Ironic's names (nova's _get_node_list renames two)
NOVA_FIELDS = ("uuid", "power_state", "target_power_state", "provision_state",
               "target_provision_state", "last_error", "maintenance", "properties",
               "instance_uuid", "traits", "resource_class")
JITTER = (0.3, 0.6)  # ironic-python-agent heartbeats every 0.3-0.6 of the timeout


def add_arguments(parser):
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--interval", type=float, default=10,
                        help="seconds between nova's periodics (a build's refresh comes "
                             "between them too)")
    parser.add_argument("--full-pass-every", type=int, default=10,
                        help="[rp_reporter] full_pass_every (the guide's recommendation)")
    parser.add_argument("--intervals", type=int, default=0,
                        help="the shortest phase, in periodics (at least a full pass and one)")
    parser.add_argument("--busy", type=int,
                        help="how many nodes the deploy and the cleaning take (default: all)")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help="which of quiet,deploy,cleaning to run, in that order")
    parser.add_argument("--heartbeat-timeout", type=float, default=300,
                        help="Ironic's [api] ramdisk_heartbeat_timeout")
    parser.add_argument("--in-ramdisk", type=float, default=300,
                        help="seconds each busy node's agent heartbeats, from its deploy "
                             "or cleaning")


class Counted:
    """An openstacksdk baremetal proxy whose GETs are counted: requests, answer bytes
    (from any thread: the whole listing runs on one of its own)."""

    def __init__(self, url):
        self.proxy = openstack.connection.Connection(
            auth_type="none", baremetal_endpoint_override=url + "/v1").baremetal
        self.requests = self.bytes = 0
        self._lock = threading.Lock()
        get = self.proxy.get

        def counted(*args, **kwargs):
            response = get(*args, **kwargs)
            with self._lock:
                self.requests += 1
                self.bytes += len(response.content)
            return response
        self.proxy.get = counted  # openstacksdk's listing calls its session's get too

    def taken(self):
        """(requests, bytes) since the last call."""
        with self._lock:
            figures = (self.requests, self.bytes)
            self.requests = self.bytes = 0
        return figures


class DriversPeriodic:
    """nova's periodic as the driver runs it with ``full_pass_every`` above 1: the
    refresh (``NodeListing``), the nodes handed to nova (``PeriodicNodes``, the due ones
    checked first), nova's look at each; the requests it made, by kind."""

    def __init__(self, proxy, full_pass_every, interval):
        from rp_reporter.nova_compute import node_listing  # nova's environment
        from rp_reporter.nova_compute import periodic
        self.periodic = periodic.PeriodicNodes(full_pass_every, interval)
        self.counter = prom.Counter("requests", "", ("listing",),
                                    registry=prom.CollectorRegistry())
        self.listing = node_listing.NodeListing(lambda: proxy,
                                                self.periodic.passes.longest_s, self.counter)
        self._counted = dict.fromkeys(KINDS, 0.0)

    def run(self):
        """One periodic: {nodes listed, nodes handed to nova, requests by kind}."""
        fulls = self.listing.view.full_at
        nodes = self.listing.nodes(NOVA_FIELDS)
        self.periodic.listed(nodes, self.listing.view.full_at)
        cache = {node.id: node for node in nodes}
        answer = self.periodic.for_periodic(
            list(cache), cache, log=True, in_scope=self.listing.in_scope,
            seen=(self.listing.refreshed_at, self.listing.seen))
        for node in answer:
            self.periodic.looked_at(node, lambda n=node: cache.get(n))
        return {"listed": len(nodes), "handed": len(answer),
                "whole_taken": self.listing.view.full_at != fulls, **self.by_kind()}

    def by_kind(self):
        """The requests of each kind since the last call."""
        found = {}
        for kind in KINDS:
            total = self.counter.labels(kind)._value.get()
            found[f"ours_{kind}_requests"] = int(total - self._counted[kind])
            self._counted[kind] = total
        return found


def periodic(ours, drivers, stock):
    """One periodic of each: {ours_*, stock_*} figures."""
    figures = drivers.run()
    ours_requests, ours_bytes = ours.taken()
    listed = list(stock.proxy.nodes(fields=NOVA_FIELDS))
    stock_requests, stock_bytes = stock.taken()
    assert len(listed) == figures["listed"], (len(listed), figures["listed"])
    return {"ours_requests": ours_requests, "ours_bytes": ours_bytes, **figures,
            "stock_requests": stock_requests, "stock_bytes": stock_bytes}


def deploy(ironic, node):
    ironic.patch(node, instance_uuid=str(uuid.uuid4()))
    ironic.provision(node, "active", "active")


def clean(ironic, node):
    ironic.patch(node, automated_clean=True)  # the conductor's option is off here
    ironic.provision(node, "deleted", "available")


class Heartbeats:
    """Each node handed to ``start`` written as a heartbeat writes it, every 0.3-0.6 of
    ``timeout`` for ``in_ramdisk`` seconds (4 writers); ``done()`` once none is left."""

    def __init__(self, ironic, timeout, in_ramdisk):
        self.ironic, self.timeout, self.in_ramdisk = ironic, timeout, in_ramdisk
        self.sent = 0
        self._due, self._lock = [], threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(4)
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _next(self):
        return time.monotonic() + random.uniform(*JITTER) * self.timeout

    def start(self, node):
        with self._lock:
            heapq.heappush(self._due, (self._next(), node, time.monotonic() + self.in_ramdisk))

    def done(self):
        with self._lock:
            return not self._due

    def _beat(self, node):
        self.ironic.patch(node, extra={"agent_last_heartbeat": time.time()})
        with self._lock:  # four writers
            self.sent += 1

    def _run(self):
        while not self._stop.wait(0.2):
            now = time.monotonic()
            with self._lock:
                while self._due and self._due[0][0] <= now:
                    _, node, until = heapq.heappop(self._due)
                    self._pool.submit(self._beat, node)
                    beat = self._next()
                    if beat < until:
                        heapq.heappush(self._due, (beat, node, until))

    def stop(self):
        self._stop.set()
        self._pool.shutdown(wait=True)


def work_on(ironic, nodes, operation, heartbeats):
    """``operation(ironic, node)`` for every node, eight at a time, on a thread, each
    node's agent heartbeating from then on: its future."""
    pool = concurrent.futures.ThreadPoolExecutor(8)

    def one(node):
        operation(ironic, node)
        heartbeats.start(node)

    def every():
        list(pool.map(one, nodes))
    return pool.submit(every)


def run(args):
    from rp_reporter import fleet_listing
    stack = common.new_stack()
    phases = [phase for phase in PHASES if phase in args.phases.split(",")]
    shortest = max(args.intervals, args.full_pass_every + 1)  # periodics a phase
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
        drivers = DriversPeriodic(ours.proxy, args.full_pass_every, args.interval)
        heartbeats = Heartbeats(ironic, args.heartbeat_timeout, args.in_ramdisk)
        rows = []
        # nodes written in the last minute are listed as written since (the listings'
        # slack for clocks): the fleet just made is let age past it first
        time.sleep(fleet_listing.SLACK_S + 5)
        drivers.run()  # the service's start: the whole listing, nova's look at every node
        ours.taken()
        busy = nodes[:args.busy or len(nodes)]
        for phase in phases:
            operation = {"deploy": deploy, "cleaning": clean}.get(phase)
            work = operation and work_on(ironic, busy, operation, heartbeats)
            periodics = 0
            while periodics < shortest or (work and not (work.done() and heartbeats.done())):
                periodics += 1
                time.sleep(args.interval)
                rows.append({"phase": phase, **periodic(ours, drivers, stock)})
                print(phase, rows[-1], flush=True)
            if work:
                work.result()
        heartbeats.stop()
        phases_summary = summary(rows)
        results = {"nodes": args.nodes, "busy": len(busy), "interval_s": args.interval,
                   "full_pass_every": args.full_pass_every,
                   "heartbeat_timeout_s": args.heartbeat_timeout,
                   "in_ramdisk_s": args.in_ramdisk, "heartbeats": heartbeats.sent,
                   "database": common.DATABASE, "load": common.load(),
                   "requests_per_periodic": {phase: figures["ours_requests_mean"] for
                                             phase, figures in phases_summary.items()},
                   "phases": phases_summary, "periodics": rows}
        common.save(results, "changes-listing" + ("" if args.nodes == 1000
                                                  else f"-{args.nodes}"))
        return results
    finally:
        stack.stop()


def summary(rows):
    """Per phase: the mean and the most per periodic of each figure, and how many
    periodics took a whole listing of ours."""
    phases = {}
    for phase in PHASES:
        found = [row for row in rows if row["phase"] == phase]
        if not found:
            continue
        figures = {"periodics": len(found),
                   "ours_whole_taken": sum(row["whole_taken"] for row in found)}
        for key in ("ours_requests", *(f"ours_{kind}_requests" for kind in KINDS),
                    "ours_bytes", "handed", "stock_requests", "stock_bytes"):
            values = [row[key] for row in found]
            figures[f"{key}_mean"] = round(sum(values) / len(values), 1)
            figures[f"{key}_max"] = max(values)
        phases[phase] = figures
    return phases
