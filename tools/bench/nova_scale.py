"""nova_scale: real nova-compute services over a large Ironic fleet (first step: stock
nova, one service over the whole fleet, the shape nova's documentation warns about).

    .tox/nova-cloud/bin/python -m tools.bench.nova_scale --nodes 1000   (nova-compute from
    that environment; not in CI)

On the nova-cloud profile (MariaDB): TEMPLATES nodes made available through Ironic's
API, the rest copies of their rows (``common.copy_nodes``); then nova-compute started
by its own command over that shard.  Measured: the time from the service's start until
every node is offered to nova's scheduler (Placement's allocation candidates with the
root traits nova asks for); the length of each ``update_available_resource`` periodic
that went over every node, from nova's own log, and how many ended in an error over
``--observe`` seconds after the first; the service's CPU and peak RSS.
"""

import argparse
import datetime
import os
import re
import statistics
import tempfile
import time

from tools import clients
from tools import localstack
from tools.bench import common
from tools.wait import wait_for

RESOURCE_CLASS = "baremetal-scale"
PLACEMENT_CLASS = "CUSTOM_BAREMETAL_SCALE"
TEMPLATES = 10
# oslo.concurrency's line when the resource tracker lets its lock go, at DEBUG: one per
# node of a periodic, every line of one periodic under the periodic's request id.
HELD = re.compile(r"^(\S+ \S+) \d+ DEBUG oslo_concurrency\.lockutils \[(?:None )?(req-[0-9a-f-]+)"
                  r'[^\]]*\] Lock "compute_resources" "released" by '
                  r'"nova\.compute\.resource_tracker\.ResourceTracker\._update_available_resource"'
                  r" :: held (\d+\.\d+)s")


def periodics(log_path, nodes):
    """The length in seconds of each update_available_resource periodic that went over
    all ``nodes`` nodes: from its first node's release of the resource tracker's lock to
    its last (nova takes the lock once per node)."""
    runs = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            found = HELD.match(line)
            if found:
                at = datetime.datetime.fromisoformat(found.group(1))
                first, _, count = runs.get(found.group(2), (at, at, 0))
                runs[found.group(2)] = (first, at, count + 1)
    return [(last - first).total_seconds() for first, last, count in runs.values()
            if count >= nodes]


def failed_periodics(log_path):
    """update_available_resource periodics that ended in an error (nova's own line)."""
    with open(log_path, errors="replace") as f:
        return sum("Error during ComputeManager.update_available_resource" in line
                   for line in f)


def stock_one(stack, nodes, periodic_s, timeout, observe_s):
    """One stock nova-compute over ``nodes`` nodes: a row of figures."""
    shard = f"scale-{nodes}"
    ironic = clients.Ironic(stack.ironic_url, shard, auth=stack.admin_auth("baremetal"))
    placement = clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"))
    started = time.monotonic()
    templates = ironic.create_many(TEMPLATES, resource_class=RESOURCE_CLASS)
    common.copy_nodes(stack, templates, nodes - TEMPLATES)
    print(f"{nodes} nodes in Ironic in {time.monotonic() - started:.0f} s", flush=True)
    host = f"stock-one-{nodes}"
    started = time.monotonic()
    log = stack.start_compute(host, "stock", shard,
                              DEFAULT={"debug": "True",
                                       "update_resources_interval": str(periodic_s)})
    service = stack.service(f"nova-compute-{host}")
    offered = wait_for(lambda: len(placement.offered(PLACEMENT_CLASS)) >= nodes, timeout,
                       f"{nodes} nodes offered", interval=5, ignore=(AssertionError,))
    cold_s = offered - started
    print(f"stock, one service: every node offered {cold_s:.0f} s after its start", flush=True)
    # The one at the start, whole; then ``observe`` seconds of what follows it.
    wait_for(lambda: periodics(log, nodes), timeout, "a whole periodic", interval=5)
    time.sleep(observe_s)
    held = periodics(log, nodes)
    row = {"nodes": nodes, "setup": "stock_one",
           "cold_start_to_schedulable_s": round(cold_s, 1),
           "periodic_s": [round(s, 1) for s in held],
           "periodic_median_s": round(statistics.median(held), 1),
           "periodic_interval_s": periodic_s,
           "periodics_failed": failed_periodics(log), "observed_s": observe_s,
           "service_cpu_s": round(common.process_cpu(service.proc.pid), 1),
           "service_peak_rss_mib": round(common.peak_rss(service.proc.pid) / 2**20, 1),
           "load": common.load()}
    service.stop()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--periodic", type=int, default=60,
                        help="nova-compute's update_resources_interval (seconds)")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--observe", type=float, default=300,
                        help="seconds watched after the first whole periodic")
    args = parser.parse_args(argv)
    localstack.exit_on_sigterm()
    workdir = tempfile.mkdtemp(prefix="nova-scale-")
    stack = localstack.LocalStack(os.path.join(workdir, "stack"),
                                  **localstack.PROFILES["nova-cloud"])
    rows = []
    try:
        stack.start()
        for nodes in args.nodes:
            rows.append(stock_one(stack, nodes, args.periodic, args.timeout, args.observe))
            print(rows[-1], flush=True)
    finally:
        stack.stop()
        common.save({"rows": rows}, "nova-scale")


if __name__ == "__main__":
    main()
