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

"""Soak: agents under a steady stream of changes, one killed and restarted now and then.

    python -m tools.bench.soak                # 4 agents, 2,000 nodes, 30 min, 20 changes/s
    python -m tools.bench.soak --minutes 3 --nodes 300

Real Placement, Ironic, RabbitMQ and Redis on loopback.  Random changes (traits,
resource_class, maintenance) at --rate per second; every --kill-every seconds
one agent is SIGKILLed and restarted.  A sample of changes is watched until
Placement shows it (the lag).  At the end, once the agents are idle, a
reconcile dry run counts the nodes where Placement is not exact (want 0).
Prints events, writes, conflicts, retries and the largest lag; saves
bench-results/soak.json.
"""

import argparse
import collections
import concurrent.futures
import functools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

from rp_reporter import conf as rp_conf
from rp_reporter import wiring
from tools import clients
from tools import localstack
from tools.bench import common
from tools.wait import NotSeen
from tools.wait import wait_for

AFTER_KILL = 60  # seconds: a change made this soon after a kill is counted apart
GAUGES = ("rp_reporter_queue_depth", "rp_reporter_last_reconcile_seconds",
          "rp_reporter_reconcile_running")
COUNTERS = ("rp_reporter_notifications_total", "rp_reporter_placement_writes_total",
            "rp_reporter_generation_conflicts_total", "rp_reporter_sync_failures_total")


def lag_figures(name, lags):
    """Sample count, p50, p90, p99 and max of some lags, in seconds."""
    return {f"{name}_samples": len(lags),
            **{f"{name}_p{q}_s": round(common.percentile(lags, q), 3) if lags else None
               for q in (50, 90, 99)},
            f"{name}_max_s": round(max(lags), 3) if lags else None}


def after_a_kill(moment, kill_times):
    return any(0 <= moment - k < AFTER_KILL for k in kill_times)


class Agent:
    def __init__(self, stack, workdir, name, lease):
        self.name, self.port = name, localstack.free_port()
        self.conf = os.path.join(workdir, f"{name}.conf")
        with open(self.conf, "w") as f:
            f.write(stack.reporter_conf(
                DEFAULT={"host": name}, ironic={"shard": "soak"},
                coordination={"backend_url": stack.redis_url, "lease": lease},
                reconcile={"interval": 60}, agent={"metrics_bind": f"127.0.0.1:{self.port}"}))
        self.log = open(os.path.join(workdir, f"{name}.log"), "a")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                                      self.conf], stdout=self.log, stderr=subprocess.STDOUT)

    def counters(self):
        """Sum of each counter and gauge family (all labels) as this process has them."""
        totals = collections.Counter()
        for sample, value in clients.metrics(self.port).items():
            for name in COUNTERS + GAUGES:
                if sample.split("{")[0] == name:
                    totals[name] += value
        return totals


def wait_idle(agents, timeout):
    """Until every agent has finished a resync, none runs one, and every work queue is
    empty, on two looks in a row (or the timeout)."""
    looks = []

    def idle_twice():
        seen = [a.counters() for a in agents]
        looks.append(all(c.get("rp_reporter_last_reconcile_seconds")
                         and not c.get("rp_reporter_reconcile_running")
                         and c.get("rp_reporter_queue_depth") == 0 for c in seen))
        return looks[-2:] == [True, True]

    try:
        wait_for(idle_twice, timeout, "every agent idle", interval=5)
    except NotSeen as not_idle:  # the soak's figures still say what the agents did
        print(not_idle, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--available", type=int, default=100,
                        help="nodes taken to 'available' so maintenance changes show")
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=float, default=20, help="changes per second")
    parser.add_argument("--kill-every", type=float, default=300, help="seconds")
    parser.add_argument("--lease", type=float, default=10)
    parser.add_argument("--writers", type=int, default=2,
                        help="threads making the changes (more threads only contend for "
                             "Ironic's sqlite)")
    args = parser.parse_args(argv)

    workdir = tempfile.mkdtemp(prefix="rp-soak-")
    stack = localstack.LocalStack(workdir)
    agents = []
    totals = collections.Counter()  # counters of agents killed so far
    lags, changes = [], collections.Counter()  # lags: (change made, lag)
    kill_times = []  # one per kill
    try:
        stack.start()
        ironic = clients.Ironic(stack.ironic_url, "soak")
        placement = clients.Placement(stack.placement_url)
        live = ironic.create_many(args.available)
        enrolled = common.load_nodes(ironic, args.nodes - args.available)
        print(f"{args.nodes} nodes loaded; starting {args.agents} agents", flush=True)
        agents = [Agent(stack, workdir, f"soak-{i}", args.lease) for i in range(args.agents)]
        for a in agents:
            a.start()
        # Changes start once the initial sync is done, so the lag measures the steady
        # state (a change made while 2,000 providers are still being created waits
        # behind them).
        wait_idle(agents, 900)
        print(f"{time.strftime('%H:%M:%S')} initial sync done; changing", flush=True)
        maintenance = dict.fromkeys(live, False)
        latest = {}  # node -> number of its latest change
        superseded = collections.Counter()

        def watch(node, change, check):
            """Time one change until Placement shows it; a later change to the same
            node supersedes it (what it set may never show), so the sample is dropped."""
            started = time.monotonic()

            def shown_or_superseded():  # one Placement read: watchers must not starve the agents
                return latest[node] != change or check(node)

            try:  # an exception is a read racing a write: look again
                seen = wait_for(shown_or_superseded, 120, f"{node}'s change in Placement",
                                interval=0.5, ignore=Exception)
            except NotSeen:
                lags.append((started, float("inf")))
                return
            if latest[node] != change:
                superseded["samples"] += 1
            else:
                lags.append((started, seen - started))

        # Changes go out from a small pool, since one thread making one Ironic call
        # after another falls behind --rate; a node has at most one change in flight,
        # so the order of its changes is the order they were made.
        lock = threading.Lock()
        in_flight = set()
        pool = concurrent.futures.ThreadPoolExecutor(args.writers)
        # No backlog: when Ironic cannot keep up, the rate falls (and is reported).
        slots = threading.BoundedSemaphore(args.writers)

        def apply(node, n, kind, change, check):
            try:
                change()
                with lock:
                    changes[kind] += 1
                    latest[node] = n
                if n % 20 == 0:  # watch one change a second
                    threading.Thread(target=watch, args=(node, n, check), daemon=True).start()
            except AssertionError as e:  # Ironic refused (e.g. sqlite busy): count, go on
                with lock:
                    changes["refused"] += 1
                print(f"change refused: {str(e)[:120]}", flush=True)
            finally:
                with lock:
                    in_flight.discard(node)
                slots.release()

        def pick(nodes):
            with lock:
                for _ in range(20):
                    node = rng.choice(nodes)
                    if node not in in_flight:
                        in_flight.add(node)
                        return node
            return None

        started = time.monotonic()
        end = started + args.minutes * 60
        next_kill = started + args.kill_every
        rng = random.Random(7)
        n = 0
        while time.monotonic() < end:
            n += 1
            kind = rng.choice(("traits", "traits", "class", "maintenance"))
            slots.acquire()
            node = pick(live if kind == "maintenance" else
                        enrolled if kind == "class" else enrolled + live)
            if node is None:
                changes["skipped_busy"] += 1
                slots.release()
            elif kind == "maintenance":
                maintenance[node] = not maintenance[node]
                want = int(maintenance[node])
                def check(node, want=want):
                    inv = placement.provider_inventories(node) or {}
                    return inv.get("CUSTOM_BAREMETAL_GOLD", {}).get("reserved") == want
                pool.submit(apply, node, n, kind,
                            functools.partial(ironic.set_maintenance, node, bool(want)), check)
            elif kind == "class":
                rc = rng.choice(("soak-a", "soak-b", "soak-c"))
                want = "CUSTOM_" + rc.upper().replace("-", "_")
                def check(node, want=want):
                    return want in (placement.provider_inventories(node) or {})
                pool.submit(apply, node, n, kind,
                            functools.partial(ironic.patch, node, resource_class=rc), check)
            else:
                # A fixed pool of names, as in a real cloud: creating a trait is one-time.
                trait = f"CUSTOM_SOAK_{rng.randrange(20)}"
                def check(node, trait=trait):
                    return trait in placement.provider_trait_names(node)
                pool.submit(apply, node, n, kind,
                            functools.partial(ironic.set_traits, node, [trait]), check)
            if time.monotonic() >= next_kill:
                victim = rng.choice(agents)
                totals.update(victim.counters())
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait()
                kill_times.append(time.monotonic())
                print(f"{time.strftime('%H:%M:%S')} killed {victim.name}; restarting "
                      f"({sum(changes.values())} changes so far)", flush=True)
                victim.start()
                next_kill += args.kill_every
            # Paced against the clock, not per loop, so a slow moment is caught up.
            time.sleep(max(0, started + n / args.rate - time.monotonic()))
        pool.shutdown(wait=True)
        changing_seconds = time.monotonic() - started

        print("changes done; waiting for the agents to settle", flush=True)
        wait_idle(agents, 300)
        time.sleep(args.lease + 5)
        conf = rp_conf.load(["--config-file", agents[0].conf])
        check_pass = wiring.reconciler(conf).run(dry_run=True)
        inexact = [r.uuid for r in check_pass.results if r.ops]
        for a in agents:
            totals.update(a.counters())
        result = {
            "agents": args.agents, "nodes": args.nodes, "minutes": args.minutes,
            "changes": dict(changes), "agent_kills": len(kill_times),
            "changes_per_second": round(sum(changes[k] for k in (
                "traits", "class", "maintenance")) / changing_seconds, 2),
            "events": int(totals["rp_reporter_notifications_total"]),
            "writes": int(totals["rp_reporter_placement_writes_total"]),
            "conflicts": int(totals["rp_reporter_generation_conflicts_total"]),
            "retries": int(totals["rp_reporter_sync_failures_total"]),
            "lag_samples_superseded": superseded["samples"],
            **lag_figures("lag", [lag for _, lag in lags]),
            # Whether the tail follows the kills: changes made just after one, apart.
            **lag_figures(f"lag_within_{AFTER_KILL}s_of_a_kill",
                          [lag for made, lag in lags if after_a_kill(made, kill_times)]),
            **lag_figures("lag_otherwise",
                          [lag for made, lag in lags if not after_a_kill(made, kill_times)]),
            "inexact_at_end": len(inexact),
        }
        print(json.dumps(result, indent=2))
        common.save(result, "soak")
        return 0 if not inexact else 1
    finally:
        localstack.terminate([a.proc for a in agents])
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
