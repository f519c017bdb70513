"""Benchmarks on the real local stack; they print figures and assert nothing.

    tox -e bench                               # all of them
    tox -e bench -- reconcile --nodes 1000
    tox -e bench -- latency --nodes 1000 --toggles 200
    tox -e bench -- ring
    tox -e bench -- compare --nodes 1000        # against nova's SchedulerReportClient

reconcile: loads N nodes into a fresh Ironic (enroll state, two classes,
every tenth with a trait), then measures the initial reconcile, a pass with
nothing changed (warm, same process), the same from a new process (cold
cache), and a drift of 1% of the nodes.

latency: N nodes (of which --available go through to 'available', so a
maintenance toggle changes what Placement must show), one rp-reporter-agent
with notifications; toggles maintenance one node at a time and times each
from the Ironic API call returning to Placement showing the new reserved
value (polled), plus the agent's own event-to-write histogram.

ring: balance (max/mean load) and the fraction of nodes that move for 3->4,
4->3 and 8->9 members at 10,000 and 100,000 nodes, against the ideal 1/M.

Figures go to stdout as tables and to bench-results/*.json.
"""

import argparse
import concurrent.futures
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from rp_reporter import conf as rp_conf
from rp_reporter import wiring
from tools import fleet
from tools import localstack


def load_nodes(ironic, count, threads=4,
               classes=("baremetal-silver", "baremetal-gold", "baremetal-gold")):
    """Fast loader: one POST per node (enroll state), classes in turn, a trait on every tenth."""
    def create(i):
        body = {"driver": "fake-hardware", "shard": ironic.shard}
        if classes[i % len(classes)] is not None:
            body["resource_class"] = classes[i % len(classes)]
        uuid = ironic._call("POST", "/v1/nodes", json=body)["uuid"]
        if i % 10 == 0:
            ironic.set_traits(uuid, ["CUSTOM_GPU"])
        return uuid
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(create, range(count)))


def figures(label, summary, nodes):
    writes = sum(n for m, n in summary.requests.items() if m != "GET")
    return {"pass": label, "nodes": nodes, "seconds": round(summary.seconds, 2),
            "writes": writes, "writes_per_node": round(writes / max(nodes, 1), 3),
            "reads": summary.requests.get("GET", 0), "requests": dict(summary.requests),
            "failed": len(summary.failures)}


def bench_reconcile(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = localstack.LocalStack(workdir)
    results = []
    try:
        stack.start(["rabbitmq", "placement", "ironic"])
        ironic = fleet.Ironic(stack.ironic_url, "bench")
        started = time.monotonic()
        nodes = load_nodes(ironic, args.nodes)
        print(f"loaded {len(nodes)} nodes into Ironic in {time.monotonic() - started:.1f} s",
              flush=True)
        conf_path = os.path.join(workdir, "rp.conf")
        with open(conf_path, "w") as f:
            f.write(stack.reporter_conf(ironic={"shard": "bench"}))
        conf = rp_conf.load(["--config-file", conf_path])
        reconciler = wiring.reconciler(conf)
        results.append(figures("initial", reconciler.run(), len(nodes)))
        results.append(figures("no change (warm)", reconciler.run(), len(nodes)))
        results.append(figures("no change (new process)", wiring.reconciler(conf).run(),
                               len(nodes)))
        drift = nodes[1:: 100]  # nodes without traits: each drift is one trait write
        for uuid in drift:
            ironic.set_traits(uuid, ["CUSTOM_DRIFT"])
        summary = reconciler.run()
        results.append(figures(f"drift of {len(drift)} nodes", summary, len(nodes)))
    finally:
        stack.stop()
    print_table(results, ("pass", "seconds", "writes", "writes_per_node", "reads", "failed"))
    save(results, "reconcile")


def print_table(rows, columns):
    print("  ".join(f"{c:>24}" if i == 0 else f"{c:>15}" for i, c in enumerate(columns)))
    for row in rows:
        print("  ".join(f"{row[c]!s:>24}" if i == 0 else f"{row[c]!s:>15}"
                        for i, c in enumerate(columns)), flush=True)


def save(results, name):
    path = os.path.join("bench-results", f"{name}.json")
    os.makedirs("bench-results", exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"saved {path}")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def scrape(port, name):
    return {k: v for k, v in fleet.metrics(port).items() if k.startswith(name)}


def bench_latency(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = localstack.LocalStack(workdir)
    agent = None
    try:
        stack.start(["rabbitmq", "placement", "ironic"])
        ironic = fleet.Ironic(stack.ironic_url, "bench")
        placement = fleet.Placement(stack.placement_url)
        live = ironic.create_many(args.available)
        all_nodes = live + load_nodes(ironic, args.nodes - args.available)
        port = localstack.free_port()
        conf_path = os.path.join(workdir, "agent.conf")
        with open(conf_path, "w") as f:
            f.write(stack.reporter_conf(ironic={"shard": "bench"}, reconcile={"interval": 3600},
                                        agent={"metrics_bind": f"127.0.0.1:{port}"}))
        agent = subprocess.Popen([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                                  conf_path], stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(workdir, "agent.log"), "w"))
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # initial sync done: every node has a provider
            time.sleep(1)
            with contextlib.suppress(OSError, ValueError):
                if scrape(port, "rp_reporter_queue_depth").get("rp_reporter_queue_depth") == 0 \
                        and all(placement.provider(n) for n in live[:: 10]):
                    break
        print(f"{args.nodes} nodes synced; toggling maintenance {args.toggles} times", flush=True)
        state = {n: False for n in live}
        latencies = []
        for _ in range(args.toggles):
            node = random.choice(live)
            state[node] = not state[node]
            want = int(state[node])
            ironic.set_maintenance(node, state[node])
            returned = time.monotonic()
            while time.monotonic() - returned < 10:
                inv = placement.provider_inventories(node)
                if inv and inv["CUSTOM_BAREMETAL_GOLD"]["reserved"] == want:
                    break
                time.sleep(0.005)
            latencies.append(time.monotonic() - returned)
        # A burst: 1,000 changes (traits on the enrolled nodes) as fast as this
        # Ironic takes them, then how long until Placement shows every last one.
        enrolled = [n for n in all_nodes if n not in set(live)][:1000]
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: ironic.set_traits(n, ["CUSTOM_BURST"]), enrolled))
        issued = time.monotonic() - started
        def queue_depth():
            return scrape(port, "rp_reporter_queue_depth").get("rp_reporter_queue_depth", 1)
        while queue_depth() or (time.sleep(0.5) or queue_depth()):  # idle twice in a row
            time.sleep(0.1)
        settled = time.monotonic() - started - issued
        wrong = [n for n in enrolled if "CUSTOM_BURST" not in placement.provider(n)["traits"]]
        hist = scrape(port, "rp_reporter_event_to_write_seconds")
        count = hist.get("rp_reporter_event_to_write_seconds_count", 0)
        result = {
            "nodes": args.nodes, "toggles": len(latencies),
            "p50_ms": round(1000 * percentile(latencies, 50), 1),
            "p90_ms": round(1000 * percentile(latencies, 90), 1),
            "p99_ms": round(1000 * percentile(latencies, 99), 1),
            "max_ms": round(1000 * max(latencies), 1),
            "mean_ms": round(1000 * statistics.mean(latencies), 1),
            "burst_changes": len(enrolled),
            "burst_issue_seconds": round(issued, 2),
            "burst_settled_after_last_change_s": round(settled, 2),
            "burst_nodes_wrong_after_settling": len(wrong),
            "agent_event_to_write_mean_ms": round(
                1000 * hist.get("rp_reporter_event_to_write_seconds_sum", 0) / max(count, 1), 1),
        }
        print_table([{"measure": k, "value": v} for k, v in result.items()], ("measure", "value"))
        save(result, "latency")
    finally:
        if agent:
            agent.send_signal(signal.SIGTERM)
            agent.wait(15)
        stack.stop()


def bench_ring(args):
    from rp_reporter import ring
    rng = random.Random(2026)
    results = []
    for count in (10_000, 100_000):
        nodes = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(count)]
        for before, after in ((3, 4), (4, 3), (8, 9)):
            started = time.monotonic()
            old = ring.Ring([f"agent-{i}" for i in range(before)], partitions=args.partitions)
            new = ring.Ring([f"agent-{i}" for i in range(after)], partitions=args.partitions)
            moved = ring.movement(old, new, nodes)
            ideal = 1 / max(before, after)
            results.append({
                "nodes": count, "members": f"{before}->{after}",
                "balance_max_mean": round(ring.balance(new, nodes), 3),
                "moved": round(moved, 4), "ideal": round(ideal, 4),
                "moved_vs_ideal": round(moved / ideal, 3),
                "seconds": round(time.monotonic() - started, 2)})
    print(f"tooz hash ring, sha256, {args.partitions} partitions per member")
    print_table(results, ("members", "nodes", "balance_max_mean", "moved", "ideal",
                          "moved_vs_ideal", "seconds"))
    save(results, "ring")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="bench")
    rec = sub.add_parser("reconcile")
    rec.add_argument("--nodes", type=int, default=1000)
    lat = sub.add_parser("latency")
    lat.add_argument("--nodes", type=int, default=1000)
    lat.add_argument("--available", type=int, default=100)
    lat.add_argument("--toggles", type=int, default=200)
    rng = sub.add_parser("ring")
    rng.add_argument("--partitions", type=int, default=1024)
    cmp_ = sub.add_parser("compare", help="side by side with nova's report client")
    cmp_.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.bench == "compare":
        from tools import bench_nova  # imports nova: only here
        return bench_nova.compare(args)
    if args.bench in (None, "reconcile"):
        bench_reconcile(args if args.bench else rec.parse_args([]))
    if args.bench in (None, "latency"):
        bench_latency(args if args.bench else lat.parse_args([]))
    if args.bench in (None, "ring"):
        bench_ring(args if args.bench else rng.parse_args([]))


if __name__ == "__main__":
    main()
