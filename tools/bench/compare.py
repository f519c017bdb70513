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

"""Side by side with nova's own reporting (needs nova: ``pip install .[nova]``).

    tox -e bench -- compare --nodes 1000 10000     # nova up to --nova-max-nodes (1000)

One real Ironic holds N nodes; each contender gets its own fresh real Placement
(same configuration), so nobody adopts anybody's providers:

* nova: ``SchedulerReportClient`` driven per node the way nova-compute's
  resource tracker drives it (ensure the root provider, set inventory and
  traits on the tree, ``update_from_provider_tree``), one client for the
  whole host, as in nova-compute;
* ours: one reconcile pass (``rp_reporter.sync.reconcile``);
* bare: a loop that issues only the minimal writes (create, traits,
  inventory per node) with known generations: the limit this Placement allows.

Then a pass with nothing changed (ours warm; nova with its cache), against the
two bare listings ours cannot avoid, and a drift of 1% of the nodes.
"""

import collections
import concurrent.futures
import os
import time

from keystoneauth1 import adapter as ksa_adapter
from keystoneauth1 import session as ksa_session
from keystoneauth1 import token_endpoint

from rp_reporter import model
from rp_reporter import wiring
from tools import clients
from tools.bench import common


class CountingAdapter(ksa_adapter.Adapter):
    """A keystoneauth Adapter that counts requests by method (for nova's client)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests = collections.Counter()

    def request(self, url, method, *args, **kwargs):
        self.requests[method.upper()] += 1
        return super().request(url, method, *args, **kwargs)


def nova_pass(client, context, desired):
    """What nova-compute's resource tracker does for each node, once."""
    for d in desired:
        tree = client.get_provider_tree_and_ensure_root(context, d.uuid, name=d.name)
        tree.update_inventory(d.uuid, d.inventories)
        tree.update_traits(d.uuid, d.traits)
        client.update_from_provider_tree(context, tree)


def bare_loop(url, desired, workers=1):
    """Only the writes Placement needs: the floor for an initial sync, ``workers``
    nodes at a time (ours runs [reconcile] workers at once: the same concurrency)."""
    import concurrent.futures
    import threading

    local = threading.local()

    def http():
        if not hasattr(local, "http"):
            local.http = clients.session(clients.PLACEMENT_HEADERS)
        return local.http

    classes = {d.resource_class for d in desired}
    traits = {t for d in desired for t in d.placement_traits}
    for kind, names in (("resource_classes", classes), ("traits", traits)):
        for name in sorted(names):
            http().put(f"{url}/{kind}/{name}", timeout=30).raise_for_status()

    def one(d):  # the same end state as ours, bookkeeping traits included
        resp = http().post(f"{url}/resource_providers", json={"uuid": d.uuid, "name": d.name},
                           timeout=30)
        resp.raise_for_status()
        resp = http().put(f"{url}/resource_providers/{d.uuid}/traits", timeout=30, json={
            "resource_provider_generation": resp.json()["generation"],
            "traits": sorted(d.placement_traits)})
        resp.raise_for_status()
        http().put(f"{url}/resource_providers/{d.uuid}/inventories", timeout=30, json={
            "resource_provider_generation": resp.json()["resource_provider_generation"],
            "inventories": d.inventories}).raise_for_status()
        return 3

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        return len(classes) + len(traits) + sum(pool.map(one, desired))


def timed(fn):
    wall, cpu = time.monotonic(), time.process_time()
    result = fn()
    return result, time.monotonic() - wall, time.process_time() - cpu


def run(args):
    """Side by side at each size in ``args.nodes``; nova only up to ``args.nova_max_nodes``."""
    import nova.conf
    from nova import objects

    nova.conf.CONF([], project="nova")
    objects.register_all()
    results = {"rows": [], "ratios": {}}
    for nodes in args.nodes:
        try:
            rows, ratios = compare_at(nodes, with_nova=nodes <= args.nova_max_nodes, args=args)
        except Exception as e:  # noqa: BLE001 - the other sizes' figures still count
            print(f"compare at {nodes} nodes failed: {e!r}", flush=True)
            results.setdefault("failed", {})[nodes] = repr(e)
            continue
        results["rows"] += rows
        results["ratios"][nodes] = ratios
        common.save(results, "compare")
    common.save(results, "compare")
    write_markdown(results, "bench-results/compare.md")
    return results


def compare_at(nodes, with_nova, args=None):
    from nova import context as nova_context
    from nova.scheduler.client import report

    stack = common.new_stack()
    extra = {name: common.new_stack() for name in ("nova", "bare") if with_nova or
             name == "bare"}
    results = []
    try:
        common.start(stack, ["rabbitmq", "placement", "ironic"])
        for s in extra.values():
            common.start(s, ["placement"])
        ironic = clients.Ironic(stack.ironic_url, "compare")
        started = time.monotonic()
        common.load_many(stack, ironic, nodes)
        print(f"loaded {nodes} nodes into Ironic in {time.monotonic() - started:.0f} s "
              f"(load {common.load()})", flush=True)
        conf, stateless = common.confs(stack, stack.workdir, "compare", args)
        reconciler = wiring.reconciler(conf)
        desired = [model.desired(model.node_from_api(r)) for r in reconciler.ironic.list_nodes()]
        n = len(desired)

        def row(contender, phase, wall, cpu, requests_by_method, placement_cpu=None,
                **more):
            total = sum(requests_by_method.values())
            writes = total - requests_by_method.get("GET", 0)
            results.append({"contender": contender, "phase": phase, "nodes": n,
                            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                            "nodes_per_s": round(n / wall, 1) if wall else None,
                            "requests": total, "requests_per_node": round(total / n, 2),
                            "reads": requests_by_method.get("GET", 0), "writes": writes,
                            "load": common.load(), "database": stack.database,
                            **({"placement_cpu_s": round(placement_cpu, 2)}
                               if placement_cpu is not None else {}), **more})
            print(f"{n:>6} {contender:>6} {phase:<40} {wall:8.2f} s  {total:7d} requests  "
                  f"load {common.load()}", flush=True)

        # Initial sync.  Each contender's Placement's own CPU is recorded too: on a
        # machine with few cores it sets a floor no client can go below.
        def placement_cpu(s, fn):
            before = common.service_cpu(s, "placement")
            return fn(), common.service_cpu(s, "placement") - before

        # Ours also with what else its requests cost the machine: is anything left of
        # the two cores for Placement to use (the limit its CPU alone sets)?
        machine, database = common.machine_cpu(), stack_cpu(stack, "mariadb")
        (summary, wall, cpu), used = placement_cpu(stack, lambda: timed(reconciler.run))
        row("ours", "initial sync", wall, cpu, summary.requests, used,
            mariadb_cpu_s=round(stack_cpu(stack, "mariadb") - database, 2),
            machine_busy=round((common.machine_cpu() - machine) / (os.cpu_count() * wall), 3))
        if with_nova:
            session = ksa_session.Session(auth=token_endpoint.Token(
                extra["nova"].placement_url, "admin"))
            nova_adapter = CountingAdapter(session, service_type="placement",
                                           endpoint_override=extra["nova"].placement_url)
            nova_client = report.SchedulerReportClient(adapter=nova_adapter)
            ctx = nova_context.get_admin_context()
            (_, wall, cpu), used = placement_cpu(
                extra["nova"], lambda: timed(lambda: nova_pass(nova_client, ctx, desired)))
            row("nova", "initial sync", wall, cpu, nova_adapter.requests, used)
        (writes, wall, cpu), used = placement_cpu(extra["bare"], lambda: timed(
            lambda: bare_loop(extra["bare"].placement_url, desired, conf.reconcile.workers)))
        row("bare", "initial sync (minimal writes)", wall, cpu, {"PUT": writes}, used)

        # Nothing changed.  Ours and the two listings take turns, five times each,
        # and each reports its median: whichever runs first after a write-heavy
        # phase finds Ironic and Placement colder, and at 1,000 nodes a pass is
        # short enough that one hiccup of MariaDB's moves a median of three.
        placement = reconciler.provider_sync.placement
        # Ours lists both sides at once; the yardstick is the two listings
        # one after the other, and the same two side by side are shown beside it.
        ours, listings, side_by_side = [], [], []
        for _ in range(5):
            ours.append(timed(reconciler.run))
            listings.append(timed(lambda: (reconciler.ironic.list_nodes(),
                                           placement.list_providers())))
            side_by_side.append(timed(lambda: both_listings(reconciler)))
        summary, wall, cpu = median(ours)
        row("ours", "no change", wall, cpu, summary.requests)
        _, wall, cpu = median(listings)
        row("bare", "no change (the 2 listings)", wall, cpu, {"GET": 2})
        _, wall, cpu = median(side_by_side)
        row("bare", "no change (the 2 listings side by side)", wall, cpu, {"GET": 2})
        if with_nova:
            before = collections.Counter(nova_adapter.requests)
            _, wall, cpu = timed(lambda: nova_pass(nova_client, ctx, desired))
            row("nova", "no change", wall, cpu, nova_adapter.requests - before)
        # A new process (cron's reconcile, an agent restart), with the state file an
        # operator configures ([DEFAULT] state_path) and without one.
        summary, wall, cpu = timed(lambda: common.new_process(conf))
        row("ours", "no change (new process)", wall, cpu, summary.requests)
        summary, wall, cpu = timed(lambda: common.new_process(stateless))
        row("ours", "no change (new process, no state file)", wall, cpu, summary.requests)
        for passes in getattr(args, "reverify", None) or ():
            if nodes >= getattr(args, "reverify_min_nodes", 0):
                conf.set_override("reverify_passes", passes, "reconcile")
                summary, wall, cpu = timed(lambda: common.new_process(conf))
                row("ours", f"no change (new process, reverify_passes {passes})", wall, cpu,
                    summary.requests)
        conf.clear_override("reverify_passes", "reconcile")

        # Drift of 1%.
        drifted = [d.uuid for d in desired if not d.traits][:max(1, n // 100)]
        for uuid in drifted:
            ironic.set_traits(uuid, ["CUSTOM_DRIFT"])
        summary, wall, cpu = timed(reconciler.run)
        row("ours", f"drift of {len(drifted)} nodes", wall, cpu, summary.requests)
    finally:
        stack.stop()
        for s in extra.values():
            s.stop()
    return results, ratios_of(results)


def median(timings):
    """The (result, wall, cpu) of median wall among ``timed`` results."""
    return sorted(timings, key=lambda t: t[1])[len(timings) // 2]


def both_listings(reconciler):
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        providers = pool.submit(reconciler.provider_sync.placement.list_providers)
        reconciler.ironic.list_nodes()
        providers.result()


def stack_cpu(stack, name):
    """A service's CPU so far, 0 where the stack has no such service (sqlite)."""
    return common.service_cpu(stack, name) if name in stack.services else 0.0


def ratios_of(rows):
    by = {(r["contender"], r["phase"]): r for r in rows}

    def ratio(a, b, field):
        if a in by and b in by and by[b][field]:
            return round(by[a][field] / by[b][field], 2)
        return None  # the peer did not run at this size

    return {
        "initial sync nodes/s, ours / nova": ratio(
            ("ours", "initial sync"), ("nova", "initial sync"), "nodes_per_s"),
        # The most "ours / nova" this machine allows any client that needs ours'
        # requests: Placement alone needs its CPU seconds for them, spread over
        # every core, while nothing else runs.
        "initial sync: the highest ours / nova this machine allows (nova's wall / "
        "ours' Placement CPU per core)": (
            round(by[("nova", "initial sync")]["wall_s"] / (
                by[("ours", "initial sync")]["placement_cpu_s"] / os.cpu_count()), 2)
            if ("nova", "initial sync") in by else None),
        # The share of the limit Placement's CPU sets that ours reaches: its CPU for
        # our requests per core, over our wall.  machine_busy says whether the cores
        # had any time left (MariaDB, the client and the rest need them too).
        "initial sync: share of the limit Placement's CPU sets (its CPU per core / wall)": (
            round(by[("ours", "initial sync")]["placement_cpu_s"] / os.cpu_count()
                  / by[("ours", "initial sync")]["wall_s"], 3)),
        "initial sync: the machine's cores busy": by[("ours", "initial sync")].get(
            "machine_busy"),
        "initial sync wall, ours / bare": ratio(
            ("ours", "initial sync"), ("bare", "initial sync (minimal writes)"), "wall_s"),
        "no change wall, nova / ours": ratio(
            ("nova", "no change"), ("ours", "no change"), "wall_s"),
        "no change cpu, nova / ours": ratio(
            ("nova", "no change"), ("ours", "no change"), "cpu_s"),
        "no change wall, ours / the two listings": ratio(
            ("ours", "no change"), ("bare", "no change (the 2 listings)"), "wall_s"),
        "no change wall, ours / the two listings side by side": ratio(
            ("ours", "no change"), ("bare", "no change (the 2 listings side by side)"),
            "wall_s"),
        "new process wall (state file), ours / the two listings": ratio(
            ("ours", "no change (new process)"), ("bare", "no change (the 2 listings)"),
            "wall_s"),
        "new process wall (no state file), ours / the two listings": ratio(
            ("ours", "no change (new process, no state file)"),
            ("bare", "no change (the 2 listings)"), "wall_s"),
        "new process nodes/s, ours (state file) / nova's no-change pass": ratio(
            ("ours", "no change (new process)"), ("nova", "no change"), "nodes_per_s"),
        **{f"new process wall ({r['phase'].split(', ')[1][:-1]}), ours / the two listings":
           ratio(("ours", r["phase"]), ("bare", "no change (the 2 listings)"), "wall_s")
           for r in rows if r["phase"].startswith("no change (new process, reverify")},
    }


COLUMNS = ("nodes", "contender", "phase", "wall_s", "cpu_s", "placement_cpu_s", "nodes_per_s",
           "requests_per_node", "reads", "writes", "load")


def write_markdown(results, path):
    with open(path, "w") as f:
        f.write(common.markdown_table(results["rows"], COLUMNS))
        for nodes, ratios in results["ratios"].items():
            f.write(f"\nAt {nodes} nodes:\n")
            f.write("".join(f"- {k}: **{v if v is not None else 'peer not run'}**\n"
                            for k, v in ratios.items()))
    print()
    print(open(path).read())
