"""Benchmarks on the real local stack; they print figures and assert nothing.

    tox -e bench                               # every figure below, in one run (~40 min)
    tox -e bench -- compare --nodes 1000 10000  # against nova's SchedulerReportClient
    tox -e bench -- latency --nodes 1000 --toggles 200 --agents 4
    tox -e bench -- ring
    tox -e bench -- rss --nodes 100000          # the listings come from a stub (labelled)
    tox -e bench -- reshaper --nodes 1000       # POST /reshaper as a bulk path
    tox -e bench -- reconcile --nodes 1000      # ours alone, plus a cold new process

compare (tools/bench_nova.py): initial sync, a pass with nothing changed, a
new process, and a drift of 1% of the nodes: ours, nova's report client driven
the way nova-compute's resource tracker drives it, and a bare loop of the
minimal writes (and the two listings a pass cannot avoid), each on its own
real Placement.

latency: N nodes (of which --available go through to 'available', so a
maintenance toggle changes what Placement must show), --agents agents on a
Redis ring with notifications; toggles maintenance one node at a time and times
each from the Ironic API call returning to Placement showing the new reserved
value (polled), then a burst of 1,000 changes, plus the agents' own
event-to-write histogram.

ring: balance (max/mean load) and the fraction of nodes that move for 3->4,
4->3 and 8->9 members at 10,000 and 100,000 nodes, against the ideal 1/M.

rss (tools/bench_rss.py): peak RSS of one agent's state for 100,000 nodes.

Figures go to stdout as tables and to bench-results/ (JSON, summary.md with
the targets checked, bench.png).
"""

import argparse
import collections
import concurrent.futures
import contextlib
import json
import os
import random
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


def markdown_table(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


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
    agents = []
    try:
        stack.start(["rabbitmq", "placement", "ironic"] + (["redis"] if args.agents > 1 else []))
        ironic = fleet.Ironic(stack.ironic_url, "bench")
        placement = fleet.Placement(stack.placement_url)
        live = ironic.create_many(args.available)
        all_nodes = live + load_nodes(ironic, args.nodes - args.available)
        ports = []
        for i in range(args.agents):
            ports.append(localstack.free_port())
            conf_path = os.path.join(workdir, f"agent-{i}.conf")
            coordination = {"backend_url": stack.redis_url} if args.agents > 1 else {}
            with open(conf_path, "w") as f:
                f.write(stack.reporter_conf(
                    DEFAULT={"host": f"bench-{i}"}, ironic={"shard": "bench"},
                    reconcile={"interval": 3600}, coordination=coordination,
                    agent={"metrics_bind": f"127.0.0.1:{ports[-1]}"}))
            agents.append(subprocess.Popen(
                [sys.executable, "-m", "rp_reporter.agent", "--config-file", conf_path],
                stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(workdir, f"agent-{i}.log"), "w")))

        def queue_depth():
            """Work queued over all agents (1 for one not answering yet)."""
            return sum(scrape(p, "rp_reporter_queue_depth").get("rp_reporter_queue_depth", 1)
                       for p in ports)

        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:  # initial sync done: every node has a provider
            time.sleep(1)
            with contextlib.suppress(OSError, ValueError):
                if queue_depth() == 0 and all(placement.provider(n) for n in live[:: 10]):
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
        while queue_depth() or (time.sleep(0.5) or queue_depth()):  # idle twice in a row
            time.sleep(0.1)
        settled = time.monotonic() - started - issued
        hist = collections.Counter()
        for port in ports:
            hist.update(scrape(port, "rp_reporter_event_to_write_seconds"))
        wrong = [n for n in enrolled if "CUSTOM_BURST" not in placement.provider(n)["traits"]]
        count = hist.get("rp_reporter_event_to_write_seconds_count", 0)
        result = {
            "nodes": args.nodes, "agents": args.agents, "toggles": len(latencies),
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
        return result
    finally:
        localstack.terminate(agents)
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
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="bench")
    every = sub.add_parser("all", help="every figure of issue 8 in one run (the default)")
    rec = sub.add_parser("reconcile")
    rec.add_argument("--nodes", type=int, default=1000)
    lat = sub.add_parser("latency")
    lat.add_argument("--nodes", type=int, default=1000)
    lat.add_argument("--available", type=int, default=100)
    lat.add_argument("--toggles", type=int, default=200)
    lat.add_argument("--agents", type=int, default=4, help="on a Redis ring when more than 1")
    rng = sub.add_parser("ring")
    rng.add_argument("--partitions", type=int, default=1024)
    cmp_ = sub.add_parser("compare", help="side by side with nova's report client")
    rss = sub.add_parser("rss", help="peak RSS of one agent's state (listings from a stub)")
    rss.add_argument("--nodes", type=int, default=100_000)
    shaper = sub.add_parser("reshaper", help="POST /reshaper as a bulk inventory path")
    shaper.add_argument("--nodes", type=int, default=1000)
    shaper.add_argument("--batches", type=int, nargs="+", default=[50, 100, 250])
    for p in (cmp_, every):
        p.add_argument("--nodes", type=int, nargs="+", default=[1000, 10_000])
        p.add_argument("--nova-max-nodes", type=int, default=1000,
                       help="nova's pass is quadratic: about 2 h at 10,000 nodes here")
    args = parser.parse_args(argv)
    if args.bench == "reconcile":
        return bench_reconcile(args)
    if args.bench == "latency":
        return bench_latency(args)
    if args.bench == "ring":
        return bench_ring(args)
    if args.bench == "reshaper":
        from tools import bench_reshaper
        return bench_reshaper.bench_reshaper(args)
    from tools import bench_report
    from tools import bench_rss
    if args.bench == "rss":
        return bench_report.write({"rss": bench_rss.bench_rss(args)})
    from tools import bench_nova  # imports nova: only here
    if args.bench == "compare":
        return bench_report.write({"compare": bench_nova.compare(args)})
    args = args if args.bench else every.parse_args([])
    bench_report.write({
        "compare": bench_nova.compare(args),
        "latency": bench_latency(lat.parse_args([])),
        "ring": bench_ring(rng.parse_args([])),
        "rss": bench_rss.bench_rss(rss.parse_args([])),
    })


if __name__ == "__main__":
    main()
