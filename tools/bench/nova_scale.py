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

"""nova-scale: real nova-compute services over a large Ironic fleet, side by side.

    tox -e bench -- nova-scale --nodes 1000            (not in CI)

On the nova-cloud profile (MariaDB, Keystone, a whole nova), for each fleet size and
each setup, on nodes of their own (a shard and a resource class per setup):

* ``stock_one``: nova's Ironic driver, one nova-compute over the whole fleet (the
  shape nova's documentation warns about past 1,000 nodes);
* ``stock_shards``: three nova-computes (``--services``), one static ``[ironic] shard``
  each (nova's answer);
* ``rp_reporter``: three nova-computes (``--services``) with rp_reporter's driver on the
  ring (``peers_from = coordination``, etcd, ``--full-pass-every``) and two agents on the
  shard, started with the services (``--agents-first``: the services once the agents
  have every node's provider).

TEMPLATES nodes of each setup go through Ironic's API, the rest are copies of their
rows (``common.copy_nodes``).  Measured, in this order:

* the time from the services' start until every node is offered to nova's scheduler
  (Placement's allocation candidates with the root traits nova asks for);
* each ``update_available_resource`` periodic of each service, from nova's own log (at
  DEBUG nova releases the resource tracker's lock once per node, ``runs``), the longest
  quiet one after the start (one node at most), and over ``--observe`` seconds after
  every service's first whole one, the CPU of each service, the database and Placement,
  and the node list requests of nova's node refreshes per interval (Ironic's log;
  rp_reporter's driver's /metrics);
* boot latency, API call to ACTIVE, of ``--boots`` servers one after another and then
  ``--boots-at-once`` together, each told by whether a periodic of the service that
  built it ran meanwhile; then the first ones deleted, and each freed node's time from
  Ironic saying available to Placement offering it;
* one service stopped and started again with its compute node records in place (the
  servers booted together kept): when its start-up pass is over and its free nodes
  schedulable again, the boot latency of servers forced onto it as it starts, what
  was lost (``--no-restart`` leaves it out);
* one service of several SIGKILLed, with the servers booted together kept: when its
  free nodes are schedulable through a survivor; compute node records, providers and
  allocations counted before and after; each service's peak RSS before.

Each setup's services are stopped before the next starts; the setups run in the order
given, later ones beside the earlier ones' idle nodes.  ``--nova`` sets nova.conf options
of every setup's services.
"""

import concurrent.futures
import datetime
import os
import re
import signal
import statistics
import tempfile
import time

from tools import clients
from tools import localstack
from tools.bench import common
from tools.bench import fleet
from tools.localstack import releases
from tools.wait import NotSeen
from tools.wait import wait_for
from tools.wait import wait_until

SETUPS = ("stock_one", "stock_shards", "rp_reporter")
SERVICES = 3   # of the shards' and rp_reporter's setups
AGENTS = 2     # beside rp_reporter's services
TEMPLATES = 10
LEASE, HEARTBEAT = 10, 1   # rp_reporter's [coordination] in nova-compute (s)
# rp_reporter's driver line when a membership renewal starts later than a third of the
# lease (nova's work held the process: under eventlet, a stretch that never yields).
LATE_RENEWAL = re.compile(r"membership renewal started (\d+\.\d+) s late")
# Ironic's line for a node list request (its own API log, or the WSGI server's), and
# those of nova's node refresh among them: nova's fields, or rp_reporter's driver's
# listings of what changed (sorted by a time stamp; the agents sort none).
NODE_LIST = re.compile(r'"?GET /v1/nodes(?:/detail)?/?\?(\S+)[ "]')
REFRESH = re.compile(r"fields=uuid(?:,|%2C)power_state(?:,|%2C)target_power_state"
                     r"|sort_key=(?:updated|created)_at")
SHARD = re.compile(r"(?:^|&)shard=([^&]+)")
# A periodic whose last line is more recent than this may still be running.
RUNNING_WITHIN_S = 10
# oslo.service's line at the start of each run of the periodic (at DEBUG).
STARTED = "Running periodic task ComputeManager.update_available_resource"
# rp_reporter's driver line at the start of each periodic (full_pass_every above 1).
DRIVER_LINE = "resource tracker periodic: "
# oslo.concurrency's line when the resource tracker lets its lock go, at DEBUG: one per
# node of a periodic, every line of one periodic under the periodic's request id.
HELD = re.compile(r"^(\S+ \S+) \d+ DEBUG oslo_concurrency\.lockutils \[(?:None )?(req-[0-9a-f-]+)"
                  r'[^\]]*\] Lock "compute_resources" "released" by '
                  r'"nova\.compute\.resource_tracker\.ResourceTracker\._update_available_resource"'
                  r" :: held (\d+\.\d+)s")


def _at(line):
    """The time.time() value of a log line's timestamp."""
    return datetime.datetime.fromisoformat(line[:23]).timestamp()


def runs(log_path, offset=0):
    """[(first, last, nodes)] of each update_available_resource periodic in one
    service's log from byte ``offset`` (a restarted service's log goes on in the same
    file), in order of start (time.time() values): from oslo.service's line
    starting it (the run at the service's start has none: its first node) to its last
    release of the resource tracker's lock, or rp_reporter's driver line naming the
    nodes it goes over when it goes over none; and how many nodes it went over.  Each
    node's line carries the run's request id (one service's runs may share one)."""
    found, started, began, went_over = {}, 0, {}, {}
    with open(log_path, errors="replace") as f:
        f.seek(offset)
        for line in f:
            if STARTED in line:
                started += 1
                began[started] = _at(line)
                continue
            held = HELD.match(line)
            if held:
                at = _at(line)
                key = (held.group(2), started)
                first, _, count = found.get(key, (began.get(started, at), at, 0))
                found[key] = (first, at, count + 1)
            elif DRIVER_LINE in line and started:
                went_over[started] = _at(line)
    runs_with_nodes = {started for _, started in found}
    return sorted([*found.values(),
                   *((began[i], at, 0) for i, at in went_over.items() if i not in runs_with_nodes)])


def _last_may_run(ordered, now):
    """Whether the latest of ``runs`` may still be running at ``now``."""
    return bool(ordered) and (now or time.time()) - ordered[-1][1] < RUNNING_WITHIN_S


def periodics(log_path, now=None, offset=0):
    """[(start, seconds, nodes)] of each finished periodic in one service's log (from
    byte ``offset``); the latest is left out while it may still be running."""
    ordered = runs(log_path, offset)
    if _last_may_run(ordered, now):
        ordered.pop()
    return [(first, last - first, count) for first, last, count in ordered]


def periodic_spans(log_path, now=None):
    """[[first, last]] of each periodic in one service's log (one that may still be
    running lasts until ``now``): read once, asked of many times with ``overlaps``."""
    now = now or time.time()
    ordered = runs(log_path)
    spans = [[first, last] for first, last, _ in ordered]
    if _last_may_run(ordered, now):
        spans[-1][1] = now
    return spans


def overlaps(spans, start, end):
    """Whether one of ``periodic_spans`` meets [start, end]."""
    return any(first <= end and last >= start for first, last in spans)


def during_periodic(log_path, start, end, now=None):
    """Whether a periodic of the service ran at some time in [start, end] (one that
    may still be running counts as running until ``now``)."""
    return overlaps(periodic_spans(log_path, now), start, end)


def node_list_requests(ironic_log, start, end):
    """Ironic's node list requests with the fields nova's node refresh asks (nova's
    own listing, and rp_reporter's driver's of the nodes written since) logged in
    [start, end] (time.time() values), by shard."""
    found = {}
    with open(ironic_log, errors="replace") as f:
        for line in f:
            listing = NODE_LIST.search(line)
            query = listing and listing.group(1)
            if (query and REFRESH.search(query) and "instance_uuid=" not in query  # one node
                    and start <= _at(line) <= end):
                shard = SHARD.search(query)
                key = shard.group(1) if shard else None
                found[key] = found.get(key, 0) + 1
    return found


def quiet_figures(periodics_):
    """The longest periodic after each service's first (its start-up pass) that went
    over one node at most (none due: nova is always given one), and the longest that
    went over more (a full pass, changed nodes)."""
    later = [(s, n) for runs_ in periodics_.values() for s, n in runs_[1:]]
    return {"quiet_periodic_max_s": max((s for s, n in later if n <= 1), default=None),
            "busy_periodic_max_s": max((s for s, n in later if n > 1), default=None)}


def late_renewals(log_path):
    """The lateness (s) of each membership renewal that started later than a third of
    the lease, from the driver's warnings in one service's log."""
    with open(log_path, errors="replace") as f:
        return [float(m.group(1)) for m in map(LATE_RENEWAL.search, f) if m]


def renewal_figures(setup, logs):
    """How late each rp_reporter service's membership renewals started, from its
    /metrics (the driver's histogram: how many, in which bucket) and its log (every one
    later than a third of the lease, exactly)."""
    figures = {}
    for host, port in setup.metrics_ports.items():
        samples = common.scrape(port, "rp_reporter_membership_renewal_late_seconds")
        late = late_renewals(logs[host])
        figures[host] = {
            "renewals": samples.get("rp_reporter_membership_renewal_late_seconds_count"),
            "buckets": {key.split('le="')[1].rstrip('"}'): value for key, value in
                        samples.items() if key.endswith('"}') and 'le="' in key},
            "later_than_third_of_lease": len(late),
            "latest_s": max(late, default=None)}
    return figures


def failed_periodics(log_path):
    """update_available_resource periodics that ended in an error (nova's own line)."""
    with open(log_path, errors="replace") as f:
        return sum("Error during ComputeManager.update_available_resource" in line
                   for line in f)


class Setup:
    """One setup's nodes, services (and agents) on the stack."""

    def __init__(self, stack, name, nodes, periodic_s, workdir, nova_settings=(),
                 full_pass_every=1, services=SERVICES):
        self.stack, self.name, self.nodes, self.workdir = stack, name, nodes, workdir
        count = 1 if name == "stock_one" else services
        self.hosts = [f"{name.replace('_', '-')}-{nodes}-{i}" for i in range(count)]
        base = f"scale-{name.replace('_', '-')}-{nodes}"
        self.shards = ([f"{base}-{i}" for i in range(count)] if name == "stock_shards"
                       else [base])
        self.resource_class = base.replace("scale-", "baremetal-")
        self.placement_class = "CUSTOM_" + self.resource_class.upper().replace("-", "_")
        self.sections = {"DEFAULT": {"debug": "True",
                                     "update_resources_interval": str(periodic_s)}}
        for section, values in fleet.sections_of(nova_settings).items():
            self.sections.setdefault(section, {}).update(values)
        self.full_pass_every = full_pass_every  # rp_reporter's services only
        self.agents = None
        self.metrics_ports = {}  # rp_reporter's services: the driver's /metrics
        self.placement = clients.Placement(stack.placement_url,
                                           auth=stack.admin_auth("placement"),
                                           nova_traits=stack.release.nova_traits)

    def make_nodes(self):
        """The setup's nodes in Ironic, split evenly over its shards; returns them."""
        made = []
        for i, shard in enumerate(self.shards):
            share = self.nodes // len(self.shards) + (i < self.nodes % len(self.shards))
            ironic = clients.Ironic(self.stack.ironic_url, shard,
                                    auth=self.stack.admin_auth("baremetal"))
            templates = ironic.create_many(TEMPLATES, resource_class=self.resource_class)
            made += templates + [n for n, _ in common.copy_nodes(self.stack, templates,
                                                                 share - TEMPLATES)]
        return made

    def start_agents(self):
        """rp_reporter's agents (the other setups have none)."""
        if self.name == "rp_reporter":
            self.agents = fleet.Agents(self.stack, self.workdir, AGENTS, 60, {
                "ironic": {"shard": self.shards[0]},
                "coordination": {"group": f"rp-{self.shards[0]}"}})

    def agents_done(self, timeout):
        """Seconds until the agents have every node's provider and nothing left to do;
        what they are at is printed each minute (at 10,000 nodes this takes minutes)."""
        started = said = time.monotonic()

        def seen():
            nonlocal said
            try:
                held = len(self.placement.holding(self.placement_class))
            except AssertionError:  # Placement has no such class yet: 400
                held = 0
            found = (held, self.agents.state())
            if time.monotonic() - said >= 60:
                said = time.monotonic()
                print(f"{self.name}: {held} of {self.nodes} providers held; agents: "
                      f"{found[1] or 'not answering'}", flush=True)
            return found

        wait_until(seen, lambda found: found[0] >= self.nodes and self.agents.settled(found[1]),
                   timeout, f"{self.name}: the agents' providers of every node", interval=2)
        return time.monotonic() - started

    def start_services(self):
        """Every nova-compute; returns their logs."""
        return {host: self.start_service(host) for host in self.hosts}

    def start_service(self, host):
        """nova-compute ``host`` (started again: its log goes on); returns its log."""
        i = self.hosts.index(host)
        return self.stack.start_compute(
            host, "stock" if self.name.startswith("stock") else "rp_reporter",
            self.shards[i % len(self.shards)], **self.sections, **self._ring(host))

    def _ring(self, host):
        """rp_reporter's [rp_reporter] section and config file for ``host``."""
        if self.name != "rp_reporter":
            return {}
        path = os.path.join(self.workdir, f"rp_reporter-{host}.conf")
        self.metrics_ports[host] = localstack.free_port()
        with open(path, "w") as f:
            f.write(self.stack.reporter_conf(
                DEFAULT={"host": host},
                coordination={"group": f"nova-{self.shards[0]}", "lease": str(LEASE),
                              "heartbeat": str(HEARTBEAT)}))
        return {"rp_reporter": {"peers_from": "coordination", "config_file": path,
                                "full_pass_every": str(self.full_pass_every),
                                "metrics_bind": f"127.0.0.1:{self.metrics_ports[host]}"}}

    def processes(self):
        return {host: self.stack.service(f"nova-compute-{host}").proc.pid
                for host in self.hosts}

    def boots(self, nova, flavor, logs, sequential, at_once, timeout):
        """Servers booted one after another, then ``at_once`` together: for each,
        (seconds from the API call to ACTIVE, whether a periodic of the service that
        built it ran meanwhile); failed builds are counted apart.  The servers are
        left for ``reuse``."""
        def boot(i):
            started = time.time()
            server = nova.boot(f"{self.resource_class}-{i}", flavor)
            built = nova.wait_built(server, timeout)
            ended = time.time()
            host = built.get("OS-EXT-SRV-ATTR:host")
            return {"server": server, "status": built["status"], "s": ended - started,
                    "node": built.get("OS-EXT-SRV-ATTR:hypervisor_hostname"), "host": host,
                    "during": host in logs and during_periodic(logs[host], started, ended),
                    "together": i >= sequential}
        made = [boot(i) for i in range(sequential)]
        with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
            made += pool.map(boot, range(sequential, sequential + at_once))
        return made

    def reuse(self, nova, booted, timeout):
        """Delete the servers; for each freed node the seconds from Ironic saying it is
        available to Placement offering it (polled every half second)."""
        ironic = clients.Ironic(self.stack.ironic_url, None,
                                auth=self.stack.admin_auth("baremetal"))
        for made in booted:
            nova.delete(made["server"])
        pending = {made["node"] for made in booted if made["node"]}
        available, offered = {}, {}

        def all_offered():
            now = time.monotonic()
            for node in pending - set(available):
                if ironic.get(node)["provision_state"] == "available":
                    available[node] = now
            for node in set(available) & self.placement.offered(self.placement_class):
                offered.setdefault(node, now)
            return set(offered) >= pending
        wait_for(all_offered, timeout, f"{self.name}: every freed node offered", interval=0.5)
        return [offered[n] - available[n] for n in pending]

    def kill(self, nova, homes, busy, timeout):
        """SIGKILL the first service; (seconds until each free node it had by
        ``homes`` (``compute_nodes()`` before), not in ``busy``, is schedulable through a
        survivor: its compute node record on a live service, and offered; None when not
        within ``timeout``, as a static shard's nodes wait for their service), how many
        free nodes it had)."""
        victim = self.hosts[0]
        free = {n for n, hosts in homes.items() if victim in hosts} - busy
        os.kill(self.stack.service(f"nova-compute-{victim}").proc.pid, signal.SIGKILL)
        killed = time.monotonic()

        def through_a_survivor():
            homes = nova.compute_nodes()
            return (all(homes.get(n) and victim not in homes[n] for n in free)
                    and free <= self.placement.offered(self.placement_class))
        try:
            return wait_for(through_a_survivor, timeout, f"{self.name}: {victim}'s free "
                            "nodes through a survivor", interval=1) - killed, len(free)
        except NotSeen:
            return None, len(free)

    def stop(self):
        for host in self.hosts:
            self.stack.service(f"nova-compute-{host}").stop()
        if self.agents:
            self.agents.stop()


def cpu_by_service(stack, setup):
    """CPU seconds so far of every process of the stack (by service: each of its
    sessions) and of the setup's agents."""
    found = {name: common.service_cpu(stack, name) for name, service in stack.services.items()
             if service.proc is not None}
    if setup.agents:
        found["agents"] = sum(common.process_cpu(p.pid) for p in setup.agents.procs)
    return found


def cpu_of(stack, setup):
    """CPU seconds so far: each service's, the database's, Placement's."""
    found = {host: common.process_cpu(pid) for host, pid in setup.processes().items()}
    found["database"] = common.service_cpu(stack, "mariadb")
    found["placement"] = common.service_cpu(stack, "placement")
    return found


def latency_figures(booted):
    """p50/p99 of the built servers' boot seconds, apart for those a periodic of their
    service overlapped (None where there were none); and the same split within the
    servers booted one after another and those booted together (``boots_by_kind``:
    {kind: {label: [count, p50, p99]}}), since a boot among others takes longer
    whether a periodic runs or not."""
    figures = {"boots": len(booted), "boots_failed": sum(b["status"] != "ACTIVE" for b in booted)}
    built = [b for b in booted if b["status"] == "ACTIVE"]

    def split(boots):
        for label, during in (("idle", False), ("during_periodic", True)):
            took = [b["s"] for b in boots if b["during"] == during]
            yield label, [len(took)] + [round(common.percentile(took, q), 2) if took else None
                                        for q in (50, 99)]

    for label, (count, p50, p99) in split(built):
        figures.update({f"boots_{label}": count, f"boot_p50_{label}_s": p50,
                        f"boot_p99_{label}_s": p99})
    figures["boots_by_kind"] = {
        kind: dict(split([b for b in built if b.get("together", False) == together]))
        for kind, together in (("one_by_one", False), ("together", True))}
    return figures


def allocated(placement, servers):
    """How many of ``servers`` Placement holds an allocation for."""
    return sum(1 for server in servers if placement.allocations(server))


def cold_start(stack, setup, started, cpu_before, args):
    """From the services' start until nova's scheduler is offered every node, and the
    CPU seconds each process of the stack used meanwhile (those above 1 s)."""
    offered = wait_for(
        lambda: len(setup.placement.offered(setup.placement_class)) >= setup.nodes,
        args.timeout, f"{setup.name}: {setup.nodes} nodes offered", interval=5,
        ignore=(AssertionError,))
    print(f"{setup.name}: every node offered {offered - started:.0f} s after the services' "
          "start", flush=True)
    cpu = cpu_by_service(stack, setup)
    used = {name: cpu[name] - cpu_before.get(name, 0) for name in cpu}
    return {"cold_start_to_schedulable_s": round(offered - started, 1),
            "cold_start_cpu_s": {name: round(s, 1) for name, s in
                                 sorted(used.items(), key=lambda kv: -kv[1]) if s >= 1}}


def steady(stack, setup, logs, args):
    """Each service's periodics, and the CPU over ``args.observe`` seconds after every
    service's first whole one: as cores busy, and per periodic (that rate over one
    periodic's length: the service's own, the median's for the database and Placement,
    which serve every service)."""
    wait_for(lambda: all(periodics(log) for log in logs.values()), args.timeout,
             f"{setup.name}: a whole periodic of every service", interval=5)
    window, listed = [time.time()], [driver_requests(setup)]
    before = cpu_of(stack, setup)
    time.sleep(args.observe)
    after = cpu_of(stack, setup)
    window.append(time.time())
    listed.append(driver_requests(setup))
    found = {host: periodics(log) for host, log in logs.items()}
    lengths = {h: statistics.median(s for _, s, _ in r[1:] or r) for h, r in found.items() if r}
    cores = {k: (after[k] - before[k]) / args.observe for k in after}
    figures = {
        # each service's periodics: [seconds, nodes] in order, the first at its start
        "periodics": {h: [[round(s, 1), n] for _, s, n in r] for h, r in found.items()},
        "periodic_s": {h: round(s, 1) for h, s in lengths.items()},
        "observed_s": args.observe,
        "cpu_cores": {k: round(c, 2) for k, c in cores.items()},
        "cpu_per_periodic_s": {k: round(c * lengths.get(k, statistics.median(lengths.values())),
                                        1) for k, c in cores.items()}}
    figures.update(quiet_figures(figures["periodics"]))
    figures.update(listing_figures(stack, setup, window, listed, args.periodic / args.observe))
    return figures


def driver_requests(setup):
    """rp_reporter's services: {host: {listing: node list requests so far}} (the driver's
    /metrics)."""
    return {host: {key.split('listing="')[1].rstrip('"}'): value for key, value in
                   common.scrape(port, "rp_reporter_ironic_node_list_requests_total").items()}
            for host, port in setup.metrics_ports.items()}


def listing_figures(stack, setup, window, listed, per_interval):
    """Node list requests of nova's node refreshes per update interval and service, over
    the observed window: counted by Ironic (its log, each shard's shared evenly by the
    services on it), and by rp_reporter's driver (its /metrics, by listing)."""
    counts = node_list_requests(os.path.join(stack.workdir, "ironic.log"), *window)
    shard_of = {h: setup.shards[i % len(setup.shards)] for i, h in enumerate(setup.hosts)}
    sharing = {shard: sum(s == shard for s in shard_of.values()) for shard in setup.shards}
    figures = {"ironic_node_list_requests_per_interval": {
        h: round(counts.get(shard, 0) / sharing[shard] * per_interval, 2)
        for h, shard in shard_of.items()}}
    if setup.metrics_ports:
        before, after = listed
        figures["driver_node_list_requests_per_interval"] = {
            h: {kind: round((n - before.get(h, {}).get(kind, 0)) * per_interval, 2)
                for kind, n in after[h].items()} for h in after}
    return figures


class Losses:
    """Compute node records, providers and allocations (of ``kept`` servers, {server:
    node}) before a fault, and what the fault lost of them."""

    def __init__(self, setup, nova, kept):
        self.setup, self.nova, self.kept = setup, nova, kept
        self.homes = nova.compute_nodes()
        self.offered = setup.placement.offered(setup.placement_class)
        self.allocations = allocated(setup.placement, kept)

    def lost(self, node_ids, suffix=""):
        homes = self.nova.compute_nodes()
        return {f"records_deleted{suffix}": sum(1 for n in node_ids
                                                if self.homes.get(n) and not homes.get(n)),
                f"records_doubled{suffix}": sum(1 for n in node_ids if len(homes.get(n, ())) > 1),
                f"providers_deleted{suffix}": len(self.offered
                                                  - self.setup.placement.provider_uuids()),
                f"allocations_lost{suffix}": self.allocations - allocated(self.setup.placement,
                                                                          self.kept)}


def after_kill(setup, nova, node_ids, kept, timeout):
    """SIGKILL one service of several (with ``kept`` servers, {server: node}, living):
    when its free nodes are schedulable through a survivor, and what was lost."""
    before = Losses(setup, nova, kept)
    figures = {"kill_to_free_schedulable_s": None}  # one service: no survivor
    if len(setup.hosts) > 1:
        killed_s, free = setup.kill(nova, before.homes, set(kept.values()), timeout)
        figures.update(kill_to_free_schedulable_s=killed_s and round(killed_s, 1),
                       killed_service_free_nodes=free)
    return dict(figures, **before.lost(node_ids), servers_kept_through_kill=len(kept))


def after_restart(setup, nova, flavor, node_ids, logs, kept, args):
    """The last service stopped (SIGTERM) with its compute node records in place and
    started again: when its start-up pass is over (nova takes no request before it)
    and each free node it had is schedulable again (its record on a live service, and
    offered); ``--restart-boots`` servers forced onto it as it starts, and as many
    again once its first periodic after the start has begun (with ``full_pass_every``
    above 1, nova's update of the free nodes taken up at the start); that periodic;
    what was lost."""
    host = setup.hosts[-1]
    before = Losses(setup, nova, kept)
    free = {n for n, hosts in before.homes.items() if host in hosts} - set(kept.values())
    setup.stack.service(f"nova-compute-{host}").stop()
    offset = os.path.getsize(logs[host])
    started = time.time()
    setup.start_service(host)

    def boot(i):
        asked = time.time()
        server = nova.boot(f"{setup.resource_class}-restart-{i}", flavor, host=host)
        built = nova.wait_built(server, args.timeout)
        return {"server": server, "status": built["status"], "asked": asked,
                "s": time.time() - asked}

    def boots(first):
        with concurrent.futures.ThreadPoolExecutor(max(args.restart_boots, 1)) as pool:
            return list(pool.map(boot, range(first, first + args.restart_boots)))
    at_start = boots(0)
    wait_for(lambda: periodics(logs[host], offset=offset), args.timeout,
             f"{setup.name}: {host}'s start-up pass", interval=5)
    first, took, count = periodics(logs[host], offset=offset)[0]
    live = set(setup.hosts)
    checked = []  # the start of each check (at 10,000 nodes nova's listing takes minutes)

    def schedulable_now():
        checked.append(time.time())
        # The nodes the boots above hold are not offered.  nova's init_host may have set
        # such a server to ERROR with no node while its queued request builds it after.
        held = {node for b in at_start for node in setup.placement.allocations(b["server"])}
        return schedulable(nova, setup.placement, setup.placement_class, free - held, live)
    wait_for(schedulable_now, args.timeout, f"{setup.name}: {host}'s free nodes schedulable",
             interval=2)
    ready_at = max(first + took, checked[-1])
    wait_for(lambda: len(runs(logs[host], offset)) >= 2, args.timeout,
             f"{setup.name}: {host}'s first periodic after its start", interval=1)
    during_next = boots(args.restart_boots)
    wait_for(lambda: len(periodics(logs[host], offset=offset)) >= 2, args.timeout,
             f"{setup.name}: the end of {host}'s first periodic after its start", interval=5)
    _, next_took, next_count = periodics(logs[host], offset=offset)[1]
    during = [b["s"] for b in during_next if b["status"] == "ACTIVE"
              and during_periodic(logs[host], b["asked"], b["asked"])]
    booted = [*at_start, *during_next]
    figures = {"restarted_service": host, "restart_free_nodes": len(free),
               "restart_first_periodic": [round(took, 1), count],
               "restart_to_schedulable_s": round(ready_at - started, 1),
               "restart_boots": len(booted),
               "restart_boots_failed": sum(b["status"] != "ACTIVE" for b in booted),
               "restart_boot_p50_at_start_s": median([
                   b["s"] for b in at_start if b["status"] == "ACTIVE"]),
               "restart_periodic_after_start": [round(next_took, 1), next_count],
               "boots_during_first_periodic": len(during),
               "boot_p50_during_first_periodic_s": median(during)}
    for made in booted:
        nova.delete(made["server"])
    return dict(figures, **before.lost(node_ids, "_through_restart"))


def schedulable(nova, placement, resource_class, nodes, live):
    """Whether each of ``nodes`` is schedulable: its compute node record on a service of
    ``live``, and offered.  nova's hypervisors are listed once (at 10,000 nodes a
    listing takes minutes)."""
    homes = nova.compute_nodes()
    return (all(live.intersection(homes.get(n, ())) for n in nodes)
            and nodes <= placement.offered(resource_class))


def median(values):
    """The median of ``values`` to 0.01, or None."""
    return round(statistics.median(values), 2) if values else None


def measure(stack, name, nodes, args, workdir):
    """One setup at one fleet size: its row of figures."""
    setup = Setup(stack, name, nodes, args.periodic, os.path.join(workdir, f"{name}-{nodes}"),
                  args.nova, args.full_pass_every if name == "rp_reporter" else 1,
                  args.services)
    os.makedirs(setup.workdir, exist_ok=True)
    made = time.monotonic()
    node_ids = setup.make_nodes()
    print(f"{name}: {nodes} nodes in Ironic in {time.monotonic() - made:.0f} s", flush=True)
    nova = clients.Nova(stack)
    flavor = nova.flavor(f"bm-{setup.resource_class}", setup.placement_class)
    row = {"nodes": nodes, "setup": name, "services": len(setup.hosts),
           "release": stack.release.name,
           "agents": AGENTS if name == "rp_reporter" else 0,
           "periodic_interval_s": args.periodic, "nova_settings": args.nova,
           "lease_s": LEASE if name == "rp_reporter" else None,
           "full_pass_every": setup.full_pass_every,
           "agents_first": bool(args.agents_first and name == "rp_reporter")}
    setup.start_agents()
    if row["agents_first"]:  # the services start beside agents that are done
        row["agents_done_s"] = round(setup.agents_done(args.timeout), 1)
    cpu_before = cpu_by_service(stack, setup)
    started = time.monotonic()
    logs = setup.start_services()
    try:
        row.update(cold_start(stack, setup, started, cpu_before, args))
        row.update(steady(stack, setup, logs, args))
        booted = setup.boots(nova, flavor, logs, args.boots, args.boots_at_once, args.timeout)
        latencies = latency_figures(booted)
        row.update(latencies, boot_samples=[  # each boot: seconds, during a periodic, host
            [round(b["s"], 2), b["during"], b["host"]] for b in booted])
        print(f"{name}: {latencies}", flush=True)
        built = [b for b in booted if b["status"] == "ACTIVE"]
        reused = setup.reuse(nova, [b for b in built if not b["together"]], args.timeout)
        row.update(reuse_s=[round(s, 2) for s in sorted(reused)],
                   reuse_p50_s=median(reused))
        row.update(service_peak_rss_mib={h: round(common.peak_rss(pid) / 2**20, 1)
                                         for h, pid in setup.processes().items()},
                   service_cpu_s={h: round(common.process_cpu(pid), 1)
                                  for h, pid in setup.processes().items()})
        if setup.metrics_ports:  # before the kill: every service answers
            row["membership_renewals"] = renewal_figures(setup, logs)
        kept = {b["server"]: b["node"] for b in built if b["together"]}
        if not args.no_restart:
            row.update(after_restart(setup, nova, flavor, node_ids, logs, kept, args))
            print(f"{name}: restart {row['restart_to_schedulable_s']} s to schedulable",
                  flush=True)
        if not args.no_kill:
            # A takeover costs what the start cost per node: watched for a lease, an
            # interval, the longest periodic seen (the start's) and a minute.
            longest = max(s for runs in row["periodics"].values() for s, _ in runs)
            row.update(after_kill(setup, nova, node_ids, kept,
                                  LEASE + args.periodic + longest + 60))
        row.update(periodics_failed={h: failed_periodics(log) for h, log in logs.items()},
                   load=common.load())
        for server in kept:
            nova.delete(server)
    except Exception as e:  # noqa: BLE001 - the figures measured so far are kept
        row["failed"] = repr(e)
    finally:
        setup.stop()
    return row


def run(args):
    return each_setup(args, "nova-scale", lambda *given: [measure(*given)])


def each_setup(args, name, measure_rows):
    """Every setup of ``args.setups`` at every size of ``args.nodes``, in order, on one
    stack of the nova-cloud profile: ``measure_rows(stack, setup, nodes, args, workdir)``'s
    rows, saved to bench-results/``name``.json after each setup (one setup's failure
    keeps the others' rows); ``args.save(more)`` saves those and ``more`` meanwhile."""
    workdir = tempfile.mkdtemp(prefix=f"{name}-")
    stack = localstack.LocalStack(os.path.join(workdir, "stack"),
                                  **localstack.PROFILES["nova-cloud"])
    rows, name_of_results = [], name + releases.venv_suffix()
    args.save = lambda more=(): common.save({"rows": [*rows, *more]}, name_of_results)
    try:
        stack.start()
        for nodes in args.nodes:
            for setup in args.setups:
                try:
                    rows.extend(measure_rows(stack, setup, nodes, args, workdir))
                except Exception as e:  # noqa: BLE001 - one setup's failure keeps the others
                    rows.append({"nodes": nodes, "setup": setup, "failed": repr(e)})
                print(rows[-1], flush=True)
                args.save()  # after each: nothing lost
    finally:
        stack.stop()
        args.save()
    return rows


def add_arguments(parser):
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--periodic", type=int, default=60,
                        help="nova-compute's update_resources_interval (s)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--observe", type=float, default=180,
                        help="seconds watched after every service's first whole periodic")
    parser.add_argument("--nova", nargs="*", default=[], metavar="SECTION.OPTION=VALUE",
                        help="nova.conf settings of every setup's services, over the bench's")
    parser.add_argument("--services", type=int, default=SERVICES,
                        help="nova-compute services of the shards' and rp_reporter's setups")
    parser.add_argument("--agents-first", action="store_true",
                        help="rp_reporter: start the services once the agents have every "
                             "node's provider (the cold start counts from the services)")
    parser.add_argument("--full-pass-every", type=int, default=10,
                        help="rp_reporter's services: [rp_reporter] full_pass_every")
    parser.add_argument("--no-kill", action="store_true",
                        help="leave out the kill (a fleet whose takeover outlasts the run)")
    parser.add_argument("--no-restart", action="store_true",
                        help="leave out the restart of one service")
    parser.add_argument("--restart-boots", type=int, default=4,
                        help="servers forced onto the restarted service as it starts")
    parser.add_argument("--boots", type=int, default=20,
                        help="servers booted one after another")
    parser.add_argument("--boots-at-once", type=int, default=10,
                        help="then servers booted together, kept through the kill")
