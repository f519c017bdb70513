"""The main job on an embedded default: a local Placement and Ironic with sample
nodes, three reporters (one per Ironic shard) reconciling them through the real
``rp-reporter`` CLI, and what Placement holds afterwards.

    tox -e demo            (or: python -m tools.demo)
"""

import json
import subprocess
import sys
import tempfile

from tools import fleet
from tools import localstack

SAMPLE = [  # per shard: (resource_class, state, traits, maintenance)
    ("baremetal-gold", "available", (), False),
    ("baremetal-gold", "available", ("CUSTOM_GPU",), False),
    ("baremetal-gold", "active", (), False),
    ("baremetal-gold", "available", (), True),
    ("Baremetal.Silver XL", "available", (), False),
    ("baremetal-silver", "manageable", ("HW_CPU_X86_AVX2",), False),
    (None, "available", (), False),
]
SHARDS = ("rack-a", "rack-b", "rack-c")


def table(rows, columns):
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*columns), line.format(*("-" * w for w in widths))]
                     + [line.format(*map(str, r)) for r in rows])


def reconcile(conf_path):
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file", conf_path,
                           "reconcile", "-f", "json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"reconcile failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)[0]


def main():
    workdir = tempfile.mkdtemp(prefix="rp-demo-")
    stack = localstack.LocalStack(workdir)
    try:
        stack.start(["rabbitmq", "placement", "ironic"])
        placement = fleet.Placement(stack.placement_url)
        nodes = []
        for shard in SHARDS:
            ironic = fleet.Ironic(stack.ironic_url, shard)
            for rc, state, traits, maint in SAMPLE:
                uuid = ironic.create(resource_class=rc, state=state, traits=traits,
                                     maintenance=maint)
                nodes.append((shard, uuid, rc, state, maint))
        confs = {}
        for shard in SHARDS:
            confs[shard] = f"{workdir}/rp-{shard}.conf"
            with open(confs[shard], "w") as f:
                f.write(stack.reporter_conf(DEFAULT={"host": f"reporter-{shard}"},
                                            ironic={"shard": shard}))
        for label in ("first pass", "second pass (nothing changed)"):
            rows = []
            for shard in SHARDS:
                s = reconcile(confs[shard])
                writes = sum(n for m, n in s["placement_requests"].items() if m != "GET")
                rows.append((f"reporter-{shard}", s["nodes"], s["created"], s["updated"],
                             s["unchanged"], s["skipped"], s["failed"], writes, s["seconds"]))
            print(f"\n== {label}: one reporter per Ironic shard ==")
            print(table(rows, ("reporter", "nodes", "created", "updated", "unchanged",
                               "skipped", "failed", "writes", "seconds")))
        rows = []
        for shard, uuid, rc, state, maint in nodes:
            rp = placement.provider(uuid)
            inv = " ".join(f"{c} reserved={r}" for c, (_, r, _) in rp["inventories"].items()) \
                if rp else "(no provider: node has no resource_class)"
            traits = " ".join(sorted(t for t in rp["traits"] if not t.startswith("CUSTOM_RPR_"))) \
                if rp else ""
            rows.append((uuid[:8], shard, rc, state + (" +maint" if maint else ""), inv, traits))
        print("\n== Placement now holds ==")
        print(table(rows, ("node", "shard", "ironic resource_class", "ironic state",
                           "placement inventory", "traits")))
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
