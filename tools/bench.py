"""Benchmarks on the real local stack; they print figures and assert nothing.

    tox -e bench                               # every figure below, in one run
    tox -e bench -- --database sqlite          # the same on the embedded sqlite stack
    tox -e bench -- compare --nodes 1000 3000 10000  # against nova's SchedulerReportClient
    tox -e bench -- latency --nodes 10000 --toggles 200 --agents 4
    tox -e bench -- ring
    tox -e bench -- rss --nodes 100000          # the listings come from a stub (labelled)
    tox -e bench -- reshaper --nodes 1000       # POST /reshaper as a bulk path
    tox -e bench -- reconcile --nodes 1000      # ours alone, plus a cold new process
    tox -e bench -- sweep --nodes 1000 --workers 4 8 16 32 --bulk-batch 100 250

Every contender runs against the same kind of Placement: by default Placement
(and Ironic) on MariaDB, one private mariadbd per stack with a database per
service, Placement under several gunicorn workers, as a deployment runs it
(tools/localstack.py); ``--database sqlite`` gives the embedded stack (one
Placement worker thread).  Auth is noauth throughout (Keystone would add the
same token validation to every contender).  Each figure is saved with the
machine's 1-minute load average when it was taken ("load").

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

rss (tools/bench_rss.py): peak RSS of one agent's state for 100,000 nodes, and
the no-change pass at that size against the stub's listings (the curve's
labelled last point).

sweep: the initial sync of the same nodes at each [reconcile] workers x
bulk_batch, each on a fresh Placement.

The new-process figures run with [DEFAULT] state_path (as an operator
configures it: the observation cache is restored from the state file) and
without it (every provider read); --reverify also times a new process at
other [reconcile] reverify_passes.

Figures go to stdout as tables and to bench-results/ (JSON, summary.md with
the targets checked, bench.png, and curve.png / curve.md: cost per node
against the number of nodes).
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

# Every contender runs against the same kind of Placement: MariaDB with several
# gunicorn workers by default (the shape operators run), sqlite with one worker
# thread under --database sqlite (the embedded test stack).  Auth is noauth for
# every contender: Keystone would add the same token validation to each.
DATABASE = "mariadb"


def new_stack(workdir=None):
    """A LocalStack of the kind this run measures (see DATABASE)."""
    return localstack.LocalStack(workdir, database=DATABASE)


def start(stack, names):
    """Start these services, and first the stack's own MariaDB when it has one."""
    stack.start((["mariadb"] if stack.database == "mariadb" else []) + list(names))


def load():
    """The machine's 1-minute load average now (recorded beside each figure)."""
    return round(os.getloadavg()[0], 2)


def service_cpu(stack, name):
    """CPU seconds used so far by a stack's service: every process of its session
    (a gunicorn master and its workers), read from /proc."""
    service = stack.services[name]
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[3]) == service.proc.pid:  # its session's process group
            total += int(fields[11]) + int(fields[12])  # utime + stime, in ticks
    return total / os.sysconf("SC_CLK_TCK")


def loader_threads():
    """Ironic on MariaDB takes concurrent writes; on sqlite more threads only queue."""
    return 8 if DATABASE == "mariadb" else 4


def load_nodes(ironic, count, threads=None,
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
    with concurrent.futures.ThreadPoolExecutor(threads or loader_threads()) as pool:
        return list(pool.map(create, range(count)))


TEMPLATES = 30  # load_nodes' pattern repeats every 30 nodes (3 classes, a trait every tenth)


def load_many(stack, ironic, count):
    """``count`` nodes in Ironic, as load_nodes makes them, faster on MariaDB.

    Ironic's API takes 20-25 node creations a second on this machine (one API
    process, whatever the client's concurrency): 10,000 nodes would take 8 minutes
    for each size.  On MariaDB the first TEMPLATES nodes go through the API and
    the rest are copies of their rows (every column but id and uuid, their traits
    too) written straight into Ironic's database: the same records the API would
    list, without the create notifications nobody here listens to yet.  On sqlite
    every node goes through the API."""
    if stack.database != "mariadb" or count <= TEMPLATES:
        return load_nodes(ironic, count)
    templates = load_nodes(ironic, TEMPLATES)

    def sql(text):
        return subprocess.run(["mariadb", "--no-defaults", "-S", stack.mariadb["socket"],
                               "-u", "root", "-N", "-B", "ironic"], input=text, check=True,
                              capture_output=True, text=True).stdout

    def columns(table, *skip):
        names = [line.split("\t")[0] for line in sql(f"SHOW COLUMNS FROM {table}").splitlines()]
        return [c for c in names if c not in skip]

    node_cols = ", ".join(f"`{c}`" for c in columns("nodes", "id", "uuid"))
    trait_cols = ", ".join(f"`{c}`" for c in columns("node_traits", "node_id"))
    # Every value below is a uuid or an integer made here (no outside input).
    listed = ", ".join(f"'{u}'" for u in templates)
    ids = dict(line.split("\t")[::-1] for line in sql(
        f"SELECT id, uuid FROM nodes WHERE uuid IN ({listed})").splitlines())  # noqa: S608
    new = [str(uuid.uuid4()) for _ in range(count - TEMPLATES)]
    statements = ["SET autocommit=0;"]
    for i, node in enumerate(new, TEMPLATES):
        template = ids[templates[i % TEMPLATES]]
        copy_node = (f"INSERT INTO nodes ({node_cols}, `uuid`) SELECT {node_cols}, '{node}' "  # noqa: S608
                     f"FROM nodes WHERE id = {template};")
        copy_traits = (f"INSERT INTO node_traits (`node_id`, {trait_cols}) SELECT "  # noqa: S608
                       f"LAST_INSERT_ID(), {trait_cols} FROM node_traits "
                       f"WHERE node_id = {template};")
        statements += [copy_node, copy_traits]
        if i % 1000 == 0:
            statements.append("COMMIT;")
    statements.append("COMMIT;")
    sql("\n".join(statements))
    return templates + new


def figures(label, summary, nodes):
    writes = sum(n for m, n in summary.requests.items() if m != "GET")
    return {"pass": label, "nodes": nodes, "seconds": round(summary.seconds, 2),
            "writes": writes, "writes_per_node": round(writes / max(nodes, 1), 3),
            "reads": summary.requests.get("GET", 0), "requests": dict(summary.requests),
            "failed": len(summary.failures), "load": load()}


def bench_reconcile(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = new_stack(workdir)
    results = []
    try:
        start(stack, ["rabbitmq", "placement", "ironic"])
        ironic = fleet.Ironic(stack.ironic_url, "bench")
        started = time.monotonic()
        nodes = load_many(stack, ironic, args.nodes)
        print(f"loaded {len(nodes)} nodes into Ironic in {time.monotonic() - started:.1f} s",
              flush=True)
        conf, stateless = confs(stack, workdir, "bench", args)
        reconciler = wiring.reconciler(conf)
        results.append(figures("initial", reconciler.run(), len(nodes)))
        results.append(figures("no change (warm)", reconciler.run(), len(nodes)))
        results.append(figures("no change (new process, state file)",
                               new_process(conf), len(nodes)))
        results.append(figures("no change (new process, no state file)",
                               new_process(stateless), len(nodes)))
        drift = nodes[1:: 100]  # nodes without traits: each drift is one trait write
        for uuid in drift:
            ironic.set_traits(uuid, ["CUSTOM_DRIFT"])
        summary = reconciler.run()
        results.append(figures(f"drift of {len(drift)} nodes", summary, len(nodes)))
    finally:
        stack.stop()
    print_table(results, ("pass", "seconds", "writes", "writes_per_node", "reads", "failed",
                          "load"))
    save(results, "reconcile")


def confs(stack, workdir, shard, args=None, **reconcile):
    """(conf with [DEFAULT] state_path, as an operator configures it; the same without).

    ``args.workers`` / ``args.bulk_batch`` / ``args.reverify_passes`` (when given)
    and ``reconcile`` override the [reconcile] defaults."""
    for name in ("workers", "bulk_batch", "reverify_passes"):
        value = getattr(args, name, None)
        if value is not None:
            reconcile.setdefault(name, value)
    reconcile = {k: v for k, v in reconcile.items() if v is not None}
    state_dir = os.path.join(workdir, "state")
    os.makedirs(state_dir, exist_ok=True)
    result = []
    for name, default in (("rp.conf", {"state_path": state_dir}), ("rp-stateless.conf", {})):
        path = os.path.join(workdir, name)
        with open(path, "w") as f:
            f.write(stack.reporter_conf(DEFAULT=dict({"host": "rp-local"}, **default),
                                        ironic={"shard": shard},
                                        **({"reconcile": reconcile} if reconcile else {})))
        result.append(rp_conf.load(["--config-file", path]))
    return tuple(result)


def new_process(conf):
    """A pass of a new process (cron's `rp-reporter reconcile`, an agent restart): the
    reporter built from configuration (restoring its state file, if any), then one pass.
    Returns the pass's Summary, its seconds counting the build."""
    started = time.monotonic()
    summary = wiring.reconciler(conf).run()
    summary.seconds = time.monotonic() - started
    return summary


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


# How often the latency bench reads the toggled node's provider.  Each read is a
# Placement request: polling every 5 ms took a visible share of the CPU the agents
# and Placement were being measured on; 20 ms adds at most that to a figure.
POLL_S = 0.02
# Seconds between the initial sync's end and the first timed change.
SETTLE_S = 30


def bench_latency(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = new_stack(workdir)
    agents = []
    try:
        start(stack, ["rabbitmq", "placement", "ironic"] + (["redis"] if args.agents > 1 else []))
        ironic = fleet.Ironic(stack.ironic_url, "bench")
        placement = fleet.Placement(stack.placement_url)
        live = ironic.create_many(args.available)
        all_nodes = live + load_many(stack, ironic, args.nodes - args.available)
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

        def passes_running():
            """Reconcile passes running over all agents (1 for one not answering yet)."""
            return sum(scrape(p, "rp_reporter_reconcile_running").get(
                "rp_reporter_reconcile_running", 1) for p in ports)

        synced_from = time.monotonic()
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:  # initial sync done: every node has a provider
            time.sleep(1)
            with contextlib.suppress(OSError, ValueError):
                if (queue_depth() == 0 and passes_running() == 0
                        and all(placement.provider(n) for n in live[:: 10])):
                    break
        synced_in = time.monotonic() - synced_from
        # The fast path in steady state: not while the initial sync's last writes,
        # MariaDB's flushing and the agents' first passes still hold the CPU.
        time.sleep(SETTLE_S)
        print(f"{args.nodes} nodes synced by {args.agents} agents in {synced_in:.0f} s; "
              f"toggling maintenance {args.toggles} times (load {load()})", flush=True)
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
                time.sleep(POLL_S)
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
            "load": load(), "agents_started_to_synced_s": round(synced_in, 1),
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


def bench_sweep(args):
    """Initial sync of the same nodes at each [reconcile] workers x bulk_batch, each on a
    fresh Placement (its own MariaDB), then a pass with nothing changed."""
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = new_stack(workdir)
    results = []
    try:
        start(stack, ["rabbitmq", "ironic"])
        ironic = fleet.Ironic(stack.ironic_url, "sweep")
        load_many(stack, ironic, args.nodes)
        for workers in args.workers:
            for batch in args.bulk_batch:
                placement = new_stack()
                try:
                    start(placement, ["placement"])
                    stack.ports["placement"] = placement.ports["placement"]
                    conf, _ = confs(stack, tempfile.mkdtemp(prefix="rp-sweep-"), "sweep",
                                    workers=workers, bulk_batch=batch)
                    reconciler = wiring.reconciler(conf)
                    row = figures("initial", reconciler.run(), args.nodes)
                    quiet = reconciler.run()
                    results.append({"workers": workers, "bulk_batch": batch,
                                    "initial_s": row["seconds"],
                                    "nodes_per_s": round(args.nodes / row["seconds"], 1),
                                    "requests": sum(row["requests"].values()),
                                    "failed": row["failed"],
                                    "no_change_s": round(quiet.seconds, 2),
                                    "load": load(), "database": DATABASE})
                    print_table(results[-1:], tuple(results[-1]))
                finally:
                    placement.stop()
    finally:
        stack.stop()
    print_table(results, tuple(results[0]) if results else ())
    save(results, f"sweep-{args.nodes}")
    return results


def main(argv=None):
    global DATABASE
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--database", choices=["mariadb", "sqlite"], default=argparse.SUPPRESS,
                        help="Placement's (and Ironic's) database for every contender: "
                             "MariaDB with several gunicorn workers (the default), or "
                             "sqlite with one worker thread (the embedded test stack)")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], parents=[common])
    sub = parser.add_subparsers(dest="bench")
    every = sub.add_parser("all", help="every figure of issue 14 in one run (the default)",
                           parents=[common])
    rec = sub.add_parser("reconcile", parents=[common])
    rec.add_argument("--nodes", type=int, default=1000)
    lat = sub.add_parser("latency", parents=[common])
    lat.add_argument("--nodes", type=int, default=10_000)
    lat.add_argument("--available", type=int, default=100)
    lat.add_argument("--toggles", type=int, default=200)
    lat.add_argument("--agents", type=int, default=4, help="on a Redis ring when more than 1")
    rng = sub.add_parser("ring", parents=[common])
    rng.add_argument("--partitions", type=int, default=1024)
    cmp_ = sub.add_parser("compare", help="side by side with nova's report client",
                          parents=[common])
    rss = sub.add_parser("rss", help="peak RSS of one agent's state (listings from a stub)",
                         parents=[common])
    rss.add_argument("--nodes", type=int, default=100_000)
    shaper = sub.add_parser("reshaper", help="POST /reshaper as a bulk inventory path",
                            parents=[common])
    shaper.add_argument("--nodes", type=int, default=1000)
    shaper.add_argument("--batches", type=int, nargs="+", default=[50, 100, 250])
    sweep = sub.add_parser("sweep", help="initial sync at each [reconcile] workers x "
                                         "bulk_batch", parents=[common])
    sweep.add_argument("--nodes", type=int, default=1000)
    sweep.add_argument("--workers", type=int, nargs="+", default=[4, 8, 16, 32])
    sweep.add_argument("--bulk-batch", type=int, nargs="+", default=[100])
    for p in (cmp_, every, rec):
        p.add_argument("--workers", type=int, help="[reconcile] workers (default: the option's)")
        p.add_argument("--bulk-batch", type=int, help="[reconcile] bulk_batch")
        p.add_argument("--reverify-passes", type=int, help="[reconcile] reverify_passes")
    for p in (cmp_, every):
        # Largest first: the machine is often busiest early in a run (tox installing,
        # other jobs finishing); the 1,000-node size carries the ratio against nova.
        p.add_argument("--nodes", type=int, nargs="+", default=[10_000, 3000, 1000])
        p.add_argument("--nova-max-nodes", type=int, default=1000,
                       help="nova's pass is quadratic: about 2 h at 10,000 nodes here")
        p.add_argument("--reverify", type=int, nargs="*", default=[32, 128, 256],
                       help="also a new process at each of these [reconcile] reverify_passes")
        p.add_argument("--reverify-min-nodes", type=int, default=10_000,
                       help="... at this many nodes and more")
    args = parser.parse_args(argv)
    localstack.exit_on_sigterm()  # a stopped run stops its stacks too
    DATABASE = getattr(args, "database", DATABASE)
    print(f"every contender on Placement with {DATABASE}; load {load()}", flush=True)
    if args.bench == "reconcile":
        return bench_reconcile(args)
    if args.bench == "latency":
        return bench_latency(args)
    if args.bench == "ring":
        return bench_ring(args)
    if args.bench == "sweep":
        return bench_sweep(args)
    if args.bench == "reshaper":
        from tools import bench_reshaper
        return bench_reshaper.bench_reshaper(args)
    from tools import bench_report
    from tools import bench_rss
    if args.bench == "rss":
        return bench_report.write({"database": DATABASE, "rss": bench_rss.bench_rss(args)})
    from tools import bench_nova  # imports nova: only here
    if args.bench == "compare":
        return bench_report.write({"database": DATABASE, "compare": bench_nova.compare(args)})
    args = args if args.bench else every.parse_args([])
    results = {"database": DATABASE}
    for name, run in (("compare", lambda: bench_nova.compare(args)),
                      ("latency", lambda: bench_latency(lat.parse_args([]))),
                      ("ring", lambda: bench_ring(rng.parse_args([]))),
                      ("rss", lambda: bench_rss.bench_rss(rss.parse_args([])))):
        try:
            results[name] = run()
        except Exception as e:  # noqa: BLE001 - one failed benchmark keeps the others' figures
            print(f"{name} failed: {e!r}", flush=True)
            results[f"{name}_failed"] = repr(e)
        bench_report.write(results)  # after each: a later failure loses nothing


if __name__ == "__main__":
    main()
