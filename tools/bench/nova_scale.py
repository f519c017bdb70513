"""nova-scale: real nova-compute services over a large Ironic fleet, side by side.

    tox -e bench -- nova-scale --nodes 1000            (not in CI)

On the nova-cloud profile (MariaDB, Keystone, a whole nova), for each fleet size and
each setup, on nodes of their own (a shard and a resource class per setup):

* ``stock_one``: nova's Ironic driver, one nova-compute over the whole fleet (the
  shape nova's documentation warns about past 1,000 nodes);
* ``stock_shards``: three nova-computes, one static ``[ironic] shard`` each (nova's
  answer);
* ``rp_reporter``: three nova-computes with rp_reporter's driver on the ring
  (``peers_from = coordination``, etcd) and two agents on the shard.

TEMPLATES nodes of each setup go through Ironic's API, the rest are copies of their
rows (``common.copy_nodes``).  Measured from the services' start: the time until
every node is offered to nova's scheduler (Placement's allocation candidates with the
root traits nova asks for); each ``update_available_resource`` periodic of each
service, from nova's own log (nova takes the resource tracker's lock once per node, at
DEBUG every release is a line under the periodic's request id); over ``--observe``
seconds after each service's first whole periodic, the services', the database's and
Placement's CPU per periodic; each service's peak RSS; and that nothing went missing
(compute node records and providers against the nodes).  Each setup's services are
stopped before the next starts; the setups run in the order given, later ones beside
the earlier ones' idle nodes.
"""

import datetime
import os
import re
import statistics
import tempfile
import time

from tools import clients
from tools import localstack
from tools.bench import common
from tools.bench import fleet
from tools.wait import wait_for

SETUPS = ("stock_one", "stock_shards", "rp_reporter")
SERVICES = 3   # of the shards' and rp_reporter's setups
AGENTS = 2     # beside rp_reporter's services
TEMPLATES = 10
LEASE, HEARTBEAT = 10, 1   # rp_reporter's [coordination] in nova-compute (s)
# A periodic whose last line is more recent than this may still be running.
RUNNING_WITHIN_S = 10
# oslo.concurrency's line when the resource tracker lets its lock go, at DEBUG: one per
# node of a periodic, every line of one periodic under the periodic's request id.
HELD = re.compile(r"^(\S+ \S+) \d+ DEBUG oslo_concurrency\.lockutils \[(?:None )?(req-[0-9a-f-]+)"
                  r'[^\]]*\] Lock "compute_resources" "released" by '
                  r'"nova\.compute\.resource_tracker\.ResourceTracker\._update_available_resource"'
                  r" :: held (\d+\.\d+)s")


def periodics(log_path, now=None):
    """[(start, seconds, nodes)] of each finished update_available_resource periodic in
    one service's log, in order: from its first node's release of the resource tracker's
    lock to its last.  The latest is left out while it may still be running."""
    runs = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            found = HELD.match(line)
            if found:
                at = datetime.datetime.fromisoformat(found.group(1)).timestamp()
                first, _, count = runs.get(found.group(2), (at, at, 0))
                runs[found.group(2)] = (first, at, count + 1)
    ordered = sorted(runs.values())
    if ordered and (now or time.time()) - ordered[-1][1] < RUNNING_WITHIN_S:
        ordered.pop()
    return [(first, last - first, count) for first, last, count in ordered]


def failed_periodics(log_path):
    """update_available_resource periodics that ended in an error (nova's own line)."""
    with open(log_path, errors="replace") as f:
        return sum("Error during ComputeManager.update_available_resource" in line
                   for line in f)


class Setup:
    """One setup's nodes, services (and agents) on the stack."""

    def __init__(self, stack, name, nodes, periodic_s, workdir):
        self.stack, self.name, self.nodes, self.workdir = stack, name, nodes, workdir
        count = 1 if name == "stock_one" else SERVICES
        self.hosts = [f"{name.replace('_', '-')}-{nodes}-{i}" for i in range(count)]
        base = f"scale-{name.replace('_', '-')}-{nodes}"
        self.shards = ([f"{base}-{i}" for i in range(count)] if name == "stock_shards"
                       else [base])
        self.resource_class = base.replace("scale-", "baremetal-")
        self.placement_class = "CUSTOM_" + self.resource_class.upper().replace("-", "_")
        self.sections = {"DEFAULT": {"debug": "True", "update_resources_interval":
                                     str(periodic_s)}}
        self.agents = None
        self.placement = clients.Placement(stack.placement_url,
                                           auth=stack.admin_auth("placement"))

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

    def start(self):
        """Agents first (rp_reporter), then every nova-compute; returns their logs."""
        if self.name == "rp_reporter":
            self.agents = fleet.Agents(self.stack, self.workdir, AGENTS, 60, {
                "ironic": {"shard": self.shards[0]},
                "coordination": {"backend_url": self.stack.coordination_url,
                                 "group": f"rp-{self.shards[0]}"}})
        logs = {}
        for i, host in enumerate(self.hosts):
            logs[host] = self.stack.start_compute(
                host, "stock" if self.name.startswith("stock") else "rp_reporter",
                self.shards[i % len(self.shards)], **self.sections, **self._ring(host))
        return logs

    def _ring(self, host):
        """rp_reporter's [rp_reporter] section and config file for ``host``."""
        if self.name != "rp_reporter":
            return {}
        path = os.path.join(self.workdir, f"rp_reporter-{host}.conf")
        with open(path, "w") as f:
            f.write(self.stack.reporter_conf(
                DEFAULT={"host": host},
                coordination={"backend_url": self.stack.coordination_url,
                              "group": f"nova-{self.shards[0]}", "lease": str(LEASE),
                              "heartbeat": str(HEARTBEAT)}))
        return {"rp_reporter": {"peers_from": "coordination", "config_file": path}}

    def processes(self):
        return {host: self.stack.service(f"nova-compute-{host}").proc.pid
                for host in self.hosts}

    def stop(self):
        for host in self.hosts:
            self.stack.service(f"nova-compute-{host}").stop()
        if self.agents:
            self.agents.stop()


def cpu_of(stack, setup):
    """CPU seconds so far: each service's, the database's, Placement's."""
    found = {host: common.process_cpu(pid) for host, pid in setup.processes().items()}
    found["database"] = common.service_cpu(stack, "mariadb")
    found["placement"] = common.service_cpu(stack, "placement")
    return found


def measure(stack, name, nodes, args, workdir):
    """One setup at one fleet size: its row of figures."""
    setup = Setup(stack, name, nodes, args.periodic, os.path.join(workdir, f"{name}-{nodes}"))
    os.makedirs(setup.workdir, exist_ok=True)
    made = time.monotonic()
    node_ids = setup.make_nodes()
    print(f"{name}: {nodes} nodes in Ironic in {time.monotonic() - made:.0f} s", flush=True)
    nova = clients.Nova(stack)
    started = time.monotonic()
    logs = setup.start()
    try:
        offered = wait_for(lambda: len(setup.placement.offered(setup.placement_class)) >= nodes,
                           args.timeout, f"{name}: {nodes} nodes offered", interval=5,
                           ignore=(AssertionError,))
        cold_s = offered - started
        print(f"{name}: every node offered {cold_s:.0f} s after the services' start",
              flush=True)
        wait_for(lambda: all(periodics(log) for log in logs.values()), args.timeout,
                 f"{name}: a whole periodic of every service", interval=5)
        before, window_start = cpu_of(stack, setup), time.time()
        time.sleep(args.observe)
        after = cpu_of(stack, setup)
        runs = {host: periodics(log) for host, log in logs.items()}
        in_window = sum(1 for host_runs in runs.values() for start, _, _ in host_runs
                        if start >= window_start) or 1
        homes = nova.compute_nodes()
        row = {
            "nodes": nodes, "setup": name, "services": len(setup.hosts),
            "agents": AGENTS if setup.agents else 0,
            "cold_start_to_schedulable_s": round(cold_s, 1),
            "periodic_interval_s": args.periodic,
            "lease_s": LEASE if name == "rp_reporter" else None,
            # each service's periodics: [seconds, nodes] in order, the first at its start
            "periodics": {h: [[round(s, 1), n] for _, s, n in r] for h, r in runs.items()},
            "periodic_s": {h: round(statistics.median(s for _, s, _ in r[1:] or r), 1)
                           for h, r in runs.items() if r},
            "periodics_failed": {h: failed_periodics(log) for h, log in logs.items()},
            "observed_s": args.observe, "periodics_in_window": in_window,
            "cpu_per_periodic_s": {k: round((after[k] - before[k]) / in_window, 2)
                                   for k in after},
            "service_cpu_s": {h: round(after[h], 1) for h in setup.hosts},
            "service_peak_rss_mib": {h: round(common.peak_rss(pid) / 2**20, 1)
                                     for h, pid in setup.processes().items()},
            "records_missing": sum(1 for n in node_ids if not homes.get(n)),
            "records_doubled": sum(1 for n in node_ids if len(homes.get(n, ())) > 1),
            "providers_missing": nodes - len(setup.placement.offered(setup.placement_class)),
            "load": common.load(),
        }
    finally:
        setup.stop()
    return row


def run(args):
    workdir = tempfile.mkdtemp(prefix="nova-scale-")
    stack = localstack.LocalStack(os.path.join(workdir, "stack"),
                                  **localstack.PROFILES["nova-cloud"])
    rows = []
    try:
        stack.start()
        for nodes in args.nodes:
            for name in args.setups:
                rows.append(measure(stack, name, nodes, args, workdir))
                print(rows[-1], flush=True)
                common.save({"rows": rows}, "nova-scale")  # after each: nothing lost
    finally:
        stack.stop()
        common.save({"rows": rows}, "nova-scale")
    return rows


def add_arguments(parser):
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--periodic", type=int, default=60,
                        help="nova-compute's update_resources_interval (s)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--observe", type=float, default=180,
                        help="seconds watched after every service's first whole periodic")
