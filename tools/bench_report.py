"""One summary of every benchmark: the targets of issue 8 checked, a markdown
table and a PNG (bench-results/summary.md, summary.json, bench.png)."""

import json
import os

from tools import bench
from tools import bench_nova

OUT = "bench-results"


def targets(results):
    """(target, measured, holds) for each target that was measured."""
    rows = []
    compare = {(r["nodes"], r["contender"], r["phase"]): r
               for r in results.get("compare", {}).get("rows", [])}
    ratios = results.get("compare", {}).get("ratios", {})
    for nodes, r in ratios.items():
        speedup = r.get("initial sync nodes/s, ours / nova")
        if speedup is not None:
            rows.append((f"initial sync {nodes} nodes: >= 5x nova's nodes/s",
                         f"{speedup}x", speedup >= 5))
        bare = r.get("initial sync wall, ours / bare")
        if bare is not None:
            rows.append((f"initial sync {nodes} nodes: <= 1.3x the bare loop's wall",
                         f"{bare}x", bare <= 1.3))
        listings = r.get("no change wall, ours / the two listings")
        quiet = compare.get((int(nodes), "ours", "no change"))
        if listings is not None and quiet:
            rows.append((f"no change {nodes} nodes: 0 writes, <= 2 Placement reads, "
                         f"<= 1.25x the two listings",
                         f"{quiet['writes']} writes, {quiet['reads']} reads, {listings}x",
                         quiet["writes"] == 0 and quiet["reads"] <= 2 and listings <= 1.25))
    lat = results.get("latency")
    if lat:
        rows.append((f"fast path ({lat['agents']} agents, {lat['nodes']} nodes): "
                     f"p50 <= 150 ms, p99 <= 500 ms",
                     f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms",
                     lat["p50_ms"] <= 150 and lat["p99_ms"] <= 500))
    rss = results.get("rss")
    if rss:
        rows.append((f"agent RSS with {rss['nodes']} nodes <= 200 MB (listings from a stub)",
                     f"{rss['peak_rss_mb']} MB", rss["peak_rss_mb"] <= 200))
    return rows


def write(results):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(results, f, indent=2, default=str)
    lines = ["| target | measured | holds |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {'yes' if ok else '**no**'} |" for t, m, ok in targets(results)]
    text = "\n".join(lines) + "\n"
    if "compare" in results:
        text += "\n" + bench.markdown_table(results["compare"]["rows"], bench_nova.COLUMNS)
    if "ring" in results:
        text += "\n" + bench.markdown_table(results["ring"], (
            "members", "nodes", "balance_max_mean", "moved", "ideal", "moved_vs_ideal"))
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write(text)
    print("\n" + text)
    plot(results)


def plot(results):
    try:
        import matplotlib
    except ImportError:
        print("matplotlib missing (pip install .[bench]): no PNG")
        return
    matplotlib.use("Agg")
    from matplotlib import pyplot

    fig, axes = pyplot.subplots(1, 4, figsize=(18, 4.2))
    colors = {"ours": "tab:green", "nova": "tab:red", "bare": "tab:gray"}
    rows = results.get("compare", {}).get("rows", [])
    sizes = sorted({r["nodes"] for r in rows})
    for ax, phase, field, title in (
            (axes[0], "initial sync", "nodes_per_s", "initial sync: nodes/s (higher is better)"),
            (axes[1], "no change", "wall_s", "pass with nothing changed: wall s")):
        width = 0.27
        for k, contender in enumerate(("ours", "nova", "bare")):
            values = [next((r[field] for r in rows if r["nodes"] == n
                            and r["contender"] == contender
                            and r["phase"].startswith(phase)), 0) for n in sizes]
            label = contender if contender != "bare" else (
                "bare loop" if phase == "initial sync" else "the two listings")
            ax.bar([i + (k - 1) * width for i in range(len(sizes))], values, width,
                   label=label, color=colors[contender])
        ax.set_xticks(range(len(sizes)), [
            f"{n:,} nodes" + ("" if any(r["nodes"] == n and r["contender"] == "nova"
                                        for r in rows) else "\n(nova not run)")
            for n in sizes])
        if phase == "no change":
            ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    lat = results.get("latency")
    if lat:
        axes[2].bar(["p50", "p90", "p99", "max"],
                    [lat["p50_ms"], lat["p90_ms"], lat["p99_ms"], lat["max_ms"]],
                    color=colors["ours"])
        axes[2].axhline(150, ls="--", color="tab:orange", label="p50 target")
        axes[2].axhline(500, ls=":", color="tab:red", label="p99 target")
        axes[2].set_title(f"fast path, {lat['agents']} agents, {lat['nodes']:,} nodes: ms",
                          fontsize=10)
        axes[2].legend(fontsize=8)
    rss = results.get("rss")
    if rss:
        steps = list(rss["steps"].items())
        axes[3].barh([s[0].split(" (")[0] for s in steps], [s[1] for s in steps],
                     color=colors["ours"])
        axes[3].axvline(200, ls="--", color="tab:red", label="target")
        axes[3].set_title(f"agent peak RSS MB, {rss['nodes']:,} nodes (listings from a stub)",
                          fontsize=10)
        axes[3].tick_params(axis="y", labelsize=7)
        axes[3].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(OUT, "bench.png")
    fig.savefig(path, dpi=90)
    print(f"saved {path}")
