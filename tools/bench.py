"""Reconcile benchmark on the real local stack; prints figures, asserts nothing.

    tox -e bench -- --nodes 1000          (or: python -m tools.bench --nodes 1000)

Loads N nodes into a fresh Ironic (enroll state, two classes, every tenth
with a trait), then measures: the initial reconcile,
a pass with nothing changed (warm, same process), the same from a new
process (cold cache), and a drift of 1% of the nodes.  Figures go to stdout
as a table and to --json.
"""

import argparse
import concurrent.futures
import json
import os
import tempfile
import time

from rp_reporter import conf as rp_conf
from rp_reporter import wiring
from tools import fleet
from tools import localstack


def load_nodes(ironic, count, threads=4):
    """Fast loader: one POST per node (enroll state), traits where asked."""
    def create(i):
        body = {"driver": "fake-hardware", "shard": ironic.shard,
                "resource_class": "baremetal-gold" if i % 3 else "baremetal-silver"}
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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--json", default="bench-results/reconcile.json")
    args = parser.parse_args(argv)
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
    columns = ("pass", "seconds", "writes", "writes_per_node", "reads", "failed")
    print("  ".join(f"{c:>24}" if i == 0 else f"{c:>15}" for i, c in enumerate(columns)))
    for row in results:
        print("  ".join(f"{row[c]!s:>24}" if i == 0 else f"{row[c]!s:>15}"
                        for i, c in enumerate(columns)))
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(results, f, indent=2)
    print(f"saved {args.json}")


if __name__ == "__main__":
    main()
