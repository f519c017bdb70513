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

"""One summary of every benchmark: the targets of issue 8 checked, a markdown
table and a PNG (bench-results/summary.md, summary.json, bench.png)."""

import json
import os

from tools.bench import common
from tools.bench import compare

OUT = "bench-results"


def targets(results):
    """(target, measured, holds) for each target that was measured (issue 14's)."""
    rows = []
    compare = {(r["nodes"], r["contender"], r["phase"]): r
               for r in results.get("compare", {}).get("rows", [])}
    ratios = results.get("compare", {}).get("ratios", {})
    for nodes, r in sorted(ratios.items(), key=lambda item: int(item[0])):
        nodes = int(nodes)
        speedup = r.get("initial sync nodes/s, ours / nova")
        if speedup is not None:
            rows.append((f"initial sync {nodes} nodes: >= 10x nova's nodes/s",
                         f"{speedup}x", speedup >= 10))
        ceiling = r.get("initial sync: the highest ours / nova this machine allows (nova's "
                        "wall / ours' Placement CPU per core)")
        if ceiling is not None:
            rows.append((f"initial sync {nodes} nodes: the most any client making ours' "
                         f"requests could reach here (nova's wall / ours' Placement CPU "
                         f"per core)", f"{ceiling}x", None))
        bare = r.get("initial sync wall, ours / bare")
        if bare is not None and nodes == 1000:
            rows.append((f"initial sync {nodes} nodes: no slower than the bare loop of the "
                         f"minimal writes, same concurrency (<= 1.0x its wall)",
                         f"{bare}x", bare <= 1.0))
        elif bare is not None:
            rows.append((f"initial sync {nodes} nodes: <= 1.3x the bare loop's wall",
                         f"{bare}x", bare <= 1.3))
        listings = r.get("no change wall, ours / the two listings")
        quiet = compare.get((nodes, "ours", "no change"))
        if listings is not None and quiet:
            rows.append((f"no change {nodes} nodes, warm: 0 writes, <= 1.25x the two listings",
                         f"{quiet['writes']} writes, {quiet['reads']} reads, {listings}x",
                         quiet["writes"] == 0 and listings <= 1.25))
        cold = r.get("new process wall (state file), ours / the two listings")
        fresh = compare.get((nodes, "ours", "no change (new process)"))
        if cold is not None and fresh and nodes >= 10_000:
            rows.append((f"no change {nodes} nodes, new process with a state file: 0 writes, "
                         f"<= 1.5x the two listings",
                         f"{fresh['writes']} writes, {fresh['reads']} reads, {cold}x",
                         fresh["writes"] == 0 and cold <= 1.5))
    lat = results.get("latency")
    if lat:
        rows.append((f"fast path ({lat['agents']} agents, {lat['nodes']} nodes): "
                     f"p50 <= 100 ms, p99 <= 300 ms",
                     f"p50 {lat['p50_ms']} ms, p99 {lat['p99_ms']} ms",
                     lat["p50_ms"] <= 100 and lat["p99_ms"] <= 300))
    rss = results.get("rss")
    if rss:
        # peak_rss_mb is MiB (the JSON key predates the units being named).
        rows.append((f"agent RSS with {rss['nodes']} nodes <= 200 MiB (listings from a stub)",
                     f"{rss['peak_rss_mb']} MiB", rss["peak_rss_mb"] <= 200))
    return rows


def write(results):
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(results, f, indent=2, default=str)
    lines = [f"Placement (and Ironic) on {results.get('database', '?')}; "
             f"load (1-minute average) beside each figure.", "",
             "| target | measured | holds |", "|---|---|---|"]
    holds = {None: "-", True: "yes", False: "**no**"}  # None: a figure, not a target
    lines += [f"| {t} | {m} | {holds[ok]} |" for t, m, ok in targets(results)]
    text = "\n".join(lines) + "\n"
    if "compare" in results:
        rows = sorted(results["compare"]["rows"], key=lambda r: r["nodes"])  # stable
        text += "\n" + common.markdown_table(rows, compare.COLUMNS)
    if "ring" in results:
        text += "\n" + common.markdown_table(results["ring"], (
            "members", "nodes", "balance_max_mean", "moved", "ideal", "moved_vs_ideal"))
    with open(os.path.join(OUT, "summary.md"), "w") as f:
        f.write(text)
    print("\n" + text)
    plot(results)
    plot_curve(results)


def curve(results):
    """{series: [(nodes, ms per node, stub?)]}: the initial sync and the pass with nothing
    changed at every size compared, and at the rss size the stub's no-change figures."""
    series = {}
    names = {("ours", "initial sync"): "ours: initial sync",
             ("bare", "initial sync (minimal writes)"): "bare loop: initial sync",
             ("ours", "no change"): "ours: no change (warm)",
             ("ours", "no change (new process)"): "ours: no change (new process, state file)",
             ("bare", "no change (the 2 listings)"): "the two listings"}
    for r in results.get("compare", {}).get("rows", []):
        name = names.get((r["contender"], r["phase"]))
        if name:
            series.setdefault(name, []).append((r["nodes"], 1000 * r["wall_s"] / r["nodes"],
                                                False))
    rss = results.get("rss") or {}
    for key, name in (("no change (warm): the pass's observation", "ours: no change (warm)"),
                      ("the two listings", "the two listings")):
        if key in rss.get("seconds", {}):
            series.setdefault(name, []).append(
                (rss["nodes"], 1000 * rss["seconds"][key] / rss["nodes"], True))
    return series


def plot_curve(results):
    series = curve(results)
    if not series:
        return
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg")
    from matplotlib import pyplot

    fig, ax = pyplot.subplots(figsize=(9, 5))
    styles = {"ours: initial sync": ("tab:green", "-", "o"),
              "bare loop: initial sync": ("tab:gray", "-", "s"),
              "ours: no change (warm)": ("tab:green", "--", "o"),
              "ours: no change (new process, state file)": ("tab:olive", "--", "^"),
              "the two listings": ("tab:gray", "--", "s")}
    for name, points in series.items():
        points.sort()
        color, line, marker = styles.get(name, ("tab:blue", "-", "x"))
        ax.plot([p[0] for p in points], [p[1] for p in points], line, color=color,
                marker=marker, label=name)
        for n, ms, stub in points:
            if stub:
                ax.annotate("stub listings", (n, ms), textcoords="offset points",
                            xytext=(-30, 8), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("ms per node (wall)")
    ax.set_title(f"cost per node, Placement on {results.get('database', '?')} "
                 f"(100,000: listings from the labelled stub)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(OUT, "curve.png")
    fig.savefig(path, dpi=90)
    print(f"saved {path}")
    lines = ["| series | " + " | ".join(f"{n:,}" for n in sorted(
        {p[0] for pts in series.values() for p in pts})) + " |"]
    sizes = sorted({p[0] for pts in series.values() for p in pts})
    lines.append("|---|" + "---|" * len(sizes))
    for name, points in series.items():
        at = {p[0]: p[1] for p in points}
        lines.append(f"| {name} (ms/node) | " + " | ".join(
            f"{at[n]:.2f}" if n in at else "" for n in sizes) + " |")
    with open(os.path.join(OUT, "curve.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


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
        axes[2].axhline(100, ls="--", color="tab:orange", label="p50 target")
        axes[2].axhline(300, ls=":", color="tab:red", label="p99 target")
        axes[2].set_title(f"fast path, {lat['agents']} agents, {lat['nodes']:,} nodes: ms",
                          fontsize=10)
        axes[2].legend(fontsize=8)
    rss = results.get("rss")
    if rss:
        steps = list(rss["steps"].items())
        axes[3].barh([s[0].split(" (")[0] for s in steps], [s[1] for s in steps],
                     color=colors["ours"])
        axes[3].axvline(200, ls="--", color="tab:red", label="target")
        axes[3].set_title(f"agent peak RSS MiB, {rss['nodes']:,} nodes (listings from a stub)",
                          fontsize=10)
        axes[3].tick_params(axis="y", labelsize=7)
        axes[3].legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(OUT, "bench.png")
    fig.savefig(path, dpi=90)
    print(f"saved {path}")
