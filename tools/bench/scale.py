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

"""scale: 10^5 nodes in the real Ironic and the real Placement (MariaDB).

    tox -e bench -- scale --nodes 100000

Loading.  ``--available`` nodes are made available through Ironic's API (the fast
path toggles their maintenance) and TEMPLATES enrolled nodes through the API too; one
reconcile pass gives them their providers and saves its observations.  The other
nodes are copies of the templates' rows in Ironic's database (``copy_nodes``), their
providers copies of the templates' providers in Placement's (``copy_providers``:
generation, inventories and traits, named by the node's uuid as rp_reporter names
them), and the saved observations are extended by the same copies: what a pass that
read those providers would have saved.  Through the APIs the providers alone would take
about 21 minutes here (the initial sync's 78 nodes/s) and a first read of each another
16 (a new process without a state file at 10,000 nodes: 97 s).

Measured, with the configuration the README recommends (``[DEFAULT] state_path`` set,
the shared listing on, the agents on a Redis ring):

* the two bare listings, Ironic's then Placement's (median of three): the yardstick,
  measured before and after each agent count, and each row set against the faster;
* one agent, then four, each a new process with its state file: each agent's first
  pass (a new process) and its warm passes after it, in seconds from the agent's own
  metrics, with the reads and writes the passes made;
* the fast path under the four agents: maintenance changes one at a time, from the
  API call returning to Placement showing it;
* each agent's peak RSS (VmHWM) in MiB and in MB.
"""

import json
import os
import shutil
import statistics
import tempfile
import time

from rp_reporter import state as rp_state
from rp_reporter import wiring
from tools import clients
from tools.bench import common
from tools.bench import compare
from tools.bench import fleet as fleet_bench
from tools.bench import latency

SHARD = fleet_bench.SHARD
MIB, MB = 1024 * 1024, 1000 * 1000


def load(stack, ironic, args, workdir):
    """(available nodes, the state document every agent starts from)."""
    started = time.monotonic()
    live = ironic.create_many(args.available)
    templates = common.load_nodes(ironic, common.TEMPLATES)
    conf, _ = common.confs(stack, workdir, SHARD, bulk_batch=100)
    wiring.reconciler(conf).run()  # the providers of the nodes made through the API
    pairs = common.copy_nodes(stack, templates, args.nodes - len(live) - len(templates))
    common.copy_providers(stack, pairs)
    with open(wiring.state(conf).key_path("observations")) as f:
        document = json.load(f)
    entries = document["values"]["observations"]["entries"]
    entries.update({node: entries[template] for node, template in pairs})
    print(f"{args.nodes} nodes and providers loaded in {time.monotonic() - started:.0f} s "
          f"(load {common.load()})", flush=True)
    return live, document


def listings(stack, workdir):
    """Median seconds of Ironic's listing then Placement's, as a pass lists them."""
    _, stateless = common.confs(stack, workdir, SHARD)
    reconciler = wiring.reconciler(stateless)
    _, wall, _ = compare.median([compare.timed(lambda: (
        reconciler.ironic.list_nodes(), reconciler.provider_sync.placement.list_providers()))
        for _ in range(3)])
    return wall


def passes(agents, count, timeout):
    """[[seconds of each pass]] per agent, until each has ``count``."""
    seen = [[] for _ in agents.ports]
    deadline = time.monotonic() + timeout
    while any(len(s) < count for s in seen):
        if time.monotonic() > deadline:
            raise RuntimeError(f"agents not through {count} passes in {timeout} s: {seen}")
        for port, done in zip(agents.ports, seen, strict=True):
            try:
                metrics = common.scrape(port, "rp_reporter_")
            except (OSError, ValueError):
                continue  # not answering yet
            if metrics.get("rp_reporter_reconcile_passes_total", 0) > len(done):
                done.append(round(metrics["rp_reporter_last_reconcile_seconds"], 2))
        time.sleep(0.5)
    return seen


def bus(port):
    """The agent's listings by source and its bus faults: a member that fell back to
    listing by itself shows ``own``; a cast the broker refused, ``casts_failed``."""
    found = common.scrape(port, "rp_reporter_")
    listings = {k.split('source="')[1].rstrip('"}'): int(v) for k, v in found.items()
                if k.startswith("rp_reporter_reconcile_listings_total{")}
    return {"listings": listings,
            "casts_failed": int(sum(v for k, v in found.items()
                                    if k.startswith("rp_reporter_listing_casts_failed_total"))),
            "dropped": int(sum(v for k, v in found.items()
                               if k.startswith("rp_reporter_listing_messages_dropped_total")))}


def role(port):
    """How the agent's passes listed: the lister sends slices, members take them."""
    listings = common.scrape(port, "rp_reporter_reconcile_listings_total")
    by_source = {k.split('source="')[1].rstrip('"}'): v for k, v in listings.items()
                 if 'source="' in k}
    return max(by_source, key=by_source.get) if by_source else "none"


def run(args):
    if common.DATABASE != "mariadb":
        raise SystemExit("scale loads Ironic and Placement through MariaDB: --database mariadb")
    workdir = tempfile.mkdtemp(prefix="rp-bench-scale-")
    stack = common.new_stack(workdir)
    result = {"nodes": args.nodes, "rows": []}
    try:
        common.start(stack, ["rabbitmq", "redis", "placement", "ironic"])
        ironic = clients.Ironic(stack.ironic_url, SHARD)
        placement = clients.Placement(stack.placement_url)
        live, document = load(stack, ironic, args, workdir)

        def yardstick():
            seconds = round(listings(stack, workdir), 2)
            result["two_listings_s"].append(seconds)
            print(f"the two listings: {seconds} s (load {common.load()})", flush=True)
            return seconds

        # Measured before and after each agent count: the same listings took 34 s
        # to 95 s on different days, right after loading.  A row is set against
        # the faster of the two around it (the stricter ratio).
        result["two_listings_s"] = []
        before = yardstick()
        for count in args.agents:
            for i in range(count):  # each a new process with the state an agent saves
                os.makedirs(os.path.join(workdir, f"state-{i}"), exist_ok=True)
                base = os.path.join(workdir, f"state-{i}", f"rp_reporter-fleet-{i}.json")
                with open(rp_state.key_path(base, "observations"), "w") as f:
                    json.dump(document, f)
            agents = fleet_bench.Agents(stack, workdir, count, args.interval,
                                        {"reconcile": {"jitter": 0}})
            try:
                seen = passes(agents, args.passes, args.passes * args.interval * 3)
                load_now = common.load()
                # Before the fast path's changes: a pass with nothing changed writes nothing.
                writes = [sum(common.scrape(port, "rp_reporter_placement_writes_total").values())
                          for port in agents.ports]
                roles = [role(port) for port in agents.ports]
                buses = [bus(port) for port in agents.ports]
                if count == max(args.agents) and args.toggles:
                    time.sleep(latency.SETTLE_S)
                    result["fast_path"] = {
                        "agents": count, "toggles": args.toggles,
                        **latency.summary(latency.toggle(ironic, placement, live,
                                                         args.toggles)),
                        "load": common.load()}
                    print(f"fast path: {result['fast_path']}", flush=True)
                rows = []
                for i, (done, proc) in enumerate(zip(seen, agents.procs, strict=True)):
                    rss = common.peak_rss(proc.pid)  # one reading, in both units
                    rows.append({"agents": count, "agent": i, "role": roles[i],
                                 "passes": len(done), "writes": int(writes[i]), "load": load_now,
                                 "new_process_s": done[0], "warm_s": statistics.median(done[1:]),
                                 "peak_rss_mib": round(rss / MIB, 1),
                                 "peak_rss_mb": round(rss / MB, 1), **buses[i]})
            finally:
                agents.stop()
            for i in range(count):
                shutil.rmtree(os.path.join(workdir, f"state-{i}"), ignore_errors=True)
            after = yardstick()
            for row in rows:
                row["listings_s"] = min(before, after)
                row["new_process_vs_listings"] = round(row["new_process_s"] / row["listings_s"], 2)
                row["warm_vs_listings"] = round(row["warm_s"] / row["listings_s"], 2)
            result["rows"] += rows
            common.print_table(rows, COLUMNS)
            before = after
        common.save(result, "scale")
        return result
    finally:
        stack.stop()


COLUMNS = ("agents", "agent", "role", "listings_s", "new_process_s", "warm_s",
           "new_process_vs_listings", "warm_vs_listings", "passes", "writes", "peak_rss_mib",
           "peak_rss_mb", "listings", "casts_failed", "dropped", "load")
