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

"""latency: the fast path, from an Ironic API call returning to Placement showing
the change, with agents on a Redis ring; then a burst of 1,000 changes."""

import collections
import concurrent.futures
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from tools import clients
from tools import localstack
from tools.bench import common
from tools.wait import NotSeen
from tools.wait import wait_for

# How often the latency bench reads the toggled node's provider.  Each read is a
# Placement request: polling every 5 ms took a visible share of the CPU the agents
# and Placement were being measured on; 20 ms adds at most that to a figure.
POLL_S = 0.02
# Seconds between the initial sync's end and the first timed change.
SETTLE_S = 30


def toggle(ironic, placement, live, toggles):
    """Seconds from each maintenance change's API call returning to Placement showing
    it, ``toggles`` changes one at a time on random ``live`` (available) nodes."""
    state = {n: False for n in live}
    latencies = []
    for _ in range(toggles):
        node = random.choice(live)
        state[node] = not state[node]
        want = int(state[node])
        ironic.set_maintenance(node, state[node])
        returned = time.monotonic()

        def shown(node=node, want=want):
            inv = placement.provider_inventories(node)
            return inv and inv["CUSTOM_BAREMETAL_GOLD"]["reserved"] == want

        try:
            seen = wait_for(shown, 10, f"{node}'s maintenance in Placement", POLL_S)
        except NotSeen:  # counted as 10 s: the figures say how many took that long
            seen = time.monotonic()
        latencies.append(seen - returned)
    return latencies


def summary(latencies):
    """p50, p90, p99, max and mean in ms."""
    return {"p50_ms": round(1000 * common.percentile(latencies, 50), 1),
            "p90_ms": round(1000 * common.percentile(latencies, 90), 1),
            "p99_ms": round(1000 * common.percentile(latencies, 99), 1),
            "max_ms": round(1000 * max(latencies), 1),
            "mean_ms": round(1000 * statistics.mean(latencies), 1)}


def run(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = common.new_stack(workdir)
    agents = []
    try:
        common.start(stack, ["rabbitmq", "placement", "ironic"]
                     + (["redis"] if args.agents > 1 else []))
        ironic = clients.Ironic(stack.ironic_url, "bench")
        placement = clients.Placement(stack.placement_url)
        live = ironic.create_many(args.available)
        all_nodes = live + common.load_many(stack, ironic, args.nodes - args.available)
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
            return sum(common.scrape(p, "rp_reporter_queue_depth").get(
                "rp_reporter_queue_depth", 1) for p in ports)

        def passes_running():
            """Reconcile passes running over all agents (1 for one not answering yet)."""
            return sum(common.scrape(p, "rp_reporter_reconcile_running").get(
                "rp_reporter_reconcile_running", 1) for p in ports)

        synced_from = time.monotonic()
        wait_for(lambda: (queue_depth() == 0 and passes_running() == 0
                          and all(placement.provider(n) for n in live[:: 10])),
                 900, "the initial sync (every node a provider)", interval=1,
                 ignore=(OSError, ValueError))
        synced_in = time.monotonic() - synced_from
        # The fast path in steady state: not while the initial sync's last writes,
        # MariaDB's flushing and the agents' first passes still hold the CPU.
        time.sleep(SETTLE_S)
        print(f"{args.nodes} nodes synced by {args.agents} agents in {synced_in:.0f} s; "
              f"toggling maintenance {args.toggles} times (load {common.load()})", flush=True)
        latencies = toggle(ironic, placement, live, args.toggles)
        # A burst: 1,000 changes (traits on the enrolled nodes) as fast as this
        # Ironic takes them, then how long until Placement shows every last one.
        enrolled = [n for n in all_nodes if n not in set(live)][:1000]
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: ironic.set_traits(n, ["CUSTOM_BURST"]), enrolled))
        issued = time.monotonic() - started
        wait_for(lambda: not queue_depth() and (time.sleep(0.5) or not queue_depth()),
                 900, "every queue idle twice in a row", interval=0.1)
        settled = time.monotonic() - started - issued
        hist = collections.Counter()
        for port in ports:
            hist.update(common.scrape(port, "rp_reporter_event_to_write_seconds"))
        wrong = [n for n in enrolled if "CUSTOM_BURST" not in placement.provider(n)["traits"]]
        count = hist.get("rp_reporter_event_to_write_seconds_count", 0)
        result = {
            "nodes": args.nodes, "agents": args.agents, "toggles": len(latencies),
            "load": common.load(), "agents_started_to_synced_s": round(synced_in, 1),
            **summary(latencies),
            "burst_changes": len(enrolled),
            "burst_issue_seconds": round(issued, 2),
            "burst_settled_after_last_change_s": round(settled, 2),
            "burst_nodes_wrong_after_settling": len(wrong),
            "agent_event_to_write_mean_ms": round(
                1000 * hist.get("rp_reporter_event_to_write_seconds_sum", 0) / max(count, 1), 1),
        }
        common.print_table([{"measure": k, "value": v} for k, v in result.items()],
                           ("measure", "value"))
        common.save(result, "latency")
        return result
    finally:
        localstack.terminate(agents)
        stack.stop()
