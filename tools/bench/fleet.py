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

"""fleet: what the fleet costs Ironic, Placement and the broker per reconcile interval
as agents are added (1, 2, 4, 8 by default) over one fleet, in steady state and with a
share of the nodes changed each interval; for each of ``--variants`` (agent
configurations, by default every agent listing for itself against the shared listing,
``[reconcile] share_listing``), so before and after are measured in one run.

One stack (MariaDB, RabbitMQ, Redis, Placement, Ironic; noauth), NODES nodes loaded
into Ironic and their providers made once by one reconcile (the bulk path).  Then, for
each agent count: that many agents on a Redis ring, started with state files of their
own; once every agent has finished a pass and nothing is queued, a window of
``--intervals`` reconcile intervals with nothing changed (steady), then as many with
``--drift`` of the nodes changed each ``--interval`` seconds through Ironic's API
(maintenance set, and unset the next time: each change a notification, as in a real
fleet).  A window of k intervals lasts until every agent has finished k more passes (an
agent's interval is its wait and its pass), and starts once each has finished a pass
after its first (a new agent's first reads what it has no observation of).  Each
window's figures are per interval: the CPU Ironic's, Placement's and RabbitMQ's own
processes used (read from /proc), the agents' own CPU, the full listings the agents
made (their own, not a slice), the notifications the agents received (the broker's
deliveries to them), the changes made, and the seconds.
"""

import concurrent.futures
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

from rp_reporter import wiring
from tools import clients
from tools import localstack
from tools.bench import common
from tools.wait import NotSeen
from tools.wait import wait_for

SHARD = "bench"
COLUMNS = ("variant", "agents", "phase", "ironic_cpu_s", "placement_cpu_s", "broker_cpu_s",
           "broker_deliveries", "agents_cpu_s", "listings", "bus_faults", "total_cpu_s", "changes",
           "seconds",
           "repair_s_max", "load")
# Providers given a stray trait behind the agents' back after the drift window (drift no
# notification names): each must be repaired by its owner's next pass, within an interval.
REPAIRS = 3


class Agents:
    """``count`` agent processes on one ring (the stack's coordination backend: Redis, or
    etcd on the production profiles), each with its metrics port."""

    def __init__(self, stack, workdir, count, interval, overrides):
        self.procs, self.ports, self.interval = [], [], interval
        for i in range(count):
            port = localstack.free_port()
            state = os.path.join(workdir, f"state-{i}")  # kept from one count to the next
            os.makedirs(state, exist_ok=True)
            path = os.path.join(workdir, f"agent-{count}-{i}.conf")
            sections = {"DEFAULT": {"host": f"fleet-{i}", "state_path": state},
                        "ironic": {"shard": SHARD}, "reconcile": {"interval": interval},
                        "coordination": {"backend_url": stack.coordination_url},
                        "agent": {"metrics_bind": f"127.0.0.1:{port}"}}
            for section, values in overrides.items():
                sections.setdefault(section, {}).update(values)
            with open(path, "w") as f:
                f.write(stack.reporter_conf(**sections))
            self.ports.append(port)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "rp_reporter.agent", "--config-file", path],
                stdout=subprocess.DEVNULL,
                stderr=open(os.path.join(workdir, f"agent-{count}-{i}.log"), "w")))

    def _sum(self, name, missing):
        total = 0.0
        for port in self.ports:
            found = {k: v for k, v in common.scrape(port, name).items()
                     if k == name or k.startswith(name + "{")}
            total += sum(found.values()) if found else missing
        return total

    def settled(self, state=None):
        """Every agent has finished a pass, none is running one and nothing is queued
        (in ``state``, one ``state()`` read, or read now)."""
        found = self.state() if state is None else state
        return bool(found) and found["passed"] == len(self.ports) and not (
            found["running"] or found["queued"])

    def state(self):
        """{passed: agents that have finished a pass, running: passes running, queued:
        nodes queued}, or {} while one is not answering yet."""
        try:
            return {"passed": sum(common.scrape(p, "rp_reporter_last_reconcile_seconds").get(
                                      "rp_reporter_last_reconcile_seconds", 0) > 0
                                  for p in self.ports),
                    "running": self._sum("rp_reporter_reconcile_running", 1),
                    "queued": self._sum("rp_reporter_queue_depth", 1)}
        except (OSError, ValueError):
            return {}

    def deliveries(self):
        return self._sum("rp_reporter_notifications_total", 0)

    def own_listings(self):
        """Passes on an agent's own listings (the lister's, and a member's without a
        slice): with sharing, one per interval is the lister's."""
        total = 0
        for port in self.ports:
            found = common.scrape(port, "rp_reporter_reconcile_listings_total")
            total += sum(found.get(f'rp_reporter_reconcile_listings_total{{source="{s}"}}', 0)
                         for s in ("own", "sent"))
        return total

    def passes(self):
        """Each agent's passes finished so far."""
        return [common.scrape(p, "rp_reporter_reconcile_passes_total").get(
            "rp_reporter_reconcile_passes_total", 0) for p in self.ports]

    def wait_passes(self, count):
        """Until every agent has finished ``count`` more passes."""
        first = self.passes()
        wait_for(lambda: all(now >= then + count for now, then
                             in zip(self.passes(), first, strict=True)),
                 (count + 2) * self.interval * 4, f"{count} more passes of every agent",
                 interval=0.5)

    def bus_faults(self):
        """Casts the broker refused and messages dropped as invalid, over every agent."""
        return (self._sum("rp_reporter_listing_casts_failed_total", 0)
                + self._sum("rp_reporter_listing_messages_dropped_total", 0))

    def cpu(self):
        return sum(common.process_cpu(p.pid) for p in self.procs)

    def stop(self):
        localstack.terminate(self.procs)


def changer(ironic, nodes, per_interval, interval, stop, made):
    """Change ``per_interval`` nodes each interval, evenly spread: maintenance on, and
    off again the next time a node comes round.  ``made`` counts the changes."""
    maintenance = {}
    gap = interval / max(per_interval, 1)
    while not stop.wait(gap):
        node = random.choice(nodes)
        maintenance[node] = not maintenance.get(node, False)
        ironic.set_maintenance(node, maintenance[node])
        made.append(node)
    for node in (n for n, on in maintenance.items() if on):  # the next window starts clean
        ironic.set_maintenance(node, False)


def repaired_within(stack, nodes, interval):
    """The longest time until a stray trait put on REPAIRS random providers (no
    notification names them) is gone again: a reconcile pass's repair, whoever lists."""
    placement = clients.Placement(stack.placement_url)
    trait = f"CUSTOM_STRAY_{random.randrange(10**6)}"
    chosen = random.sample(nodes, REPAIRS)
    added = {}
    for node in chosen:
        placement.add_trait(node, trait)
        added[node] = time.monotonic()
    took = {}

    def all_repaired():
        for node in set(chosen) - set(took):
            if trait not in placement.provider_trait_names(node):
                took[node] = time.monotonic() - added[node]
        return len(took) == len(chosen)

    try:
        wait_for(all_repaired, 3 * interval, "every stray trait repaired", interval=0.2)
    except NotSeen:
        return None
    return round(max(took.values()), 2)


def window(stack, agents, intervals, made=()):
    """Per-interval figures over the next ``intervals`` intervals of the fleet: until its
    agents have finished ``intervals`` passes each (an agent's interval is its wait plus
    its pass, so the window is as long as the passes make it, whatever their length)."""
    def reading():
        return {"ironic": common.service_cpu(stack, "ironic"),
                "placement": common.service_cpu(stack, "placement"),
                "broker": common.service_cpu(stack, "rabbitmq"),
                "agents": agents.cpu(), "deliveries": agents.deliveries(),
                "listings": agents.own_listings(), "bus_faults": agents.bus_faults(),
                "changes": len(made), "at": time.monotonic()}
    before = reading()
    agents.wait_passes(intervals)
    after = reading()
    per = {k: round((after[k] - before[k]) / intervals, 2) for k in before}
    return {"ironic_cpu_s": per["ironic"], "placement_cpu_s": per["placement"],
            "broker_cpu_s": per["broker"], "broker_deliveries": per["deliveries"],
            "agents_cpu_s": per["agents"], "listings": per["listings"],
            "total_cpu_s": round(per["ironic"] + per["placement"] + per["broker"], 2),
            "bus_faults": per["bus_faults"], "changes": per["changes"], "seconds": per["at"],
            "load": common.load()}


def sections_of(settings):
    """["section.option=value", ...] -> {section: {option: value}}."""
    sections = {}
    for setting in settings:
        key, value = setting.split("=", 1)
        section, option = key.split(".", 1)
        sections.setdefault(section, {})[option] = value
    return sections


def variants(args):
    """[(name, agent sections)] of ``--variants``, each over ``--set``."""
    found = []
    for variant in args.variants:
        name, _, settings = variant.partition(":")
        sections = sections_of(args.set)
        for section, values in sections_of(filter(None, settings.split(","))).items():
            sections.setdefault(section, {}).update(values)
        found.append((name, sections))
    return found


def measure(stack, ironic, nodes, workdir, args, name, sections, count):
    """The steady and the drift window of ``count`` agents configured by ``sections``."""
    rows = []
    agents = Agents(stack, workdir, count, args.interval, sections)
    try:
        wait_for(agents.settled, args.settle_timeout, f"{count} agents settled", interval=2)
        # Into the cadence: every agent one more pass after its first (a new agent's
        # first pass reads what it has no observation of).
        agents.wait_passes(1)
        steady = window(stack, agents, args.intervals)
        rows.append({"variant": name, "agents": count, "phase": "steady", **steady})
        common.print_table(rows[-1:], COLUMNS)
        stop, made = threading.Event(), []
        per_interval = max(1, round(args.drift * args.nodes))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            changing = pool.submit(changer, ironic, nodes, per_interval, args.interval, stop,
                                   made)
            drift = window(stack, agents, args.intervals, made)
            stop.set()
            changing.result()
        # Drift only a pass can see, repaired within an interval (None: not within three).
        drift["repair_s_max"] = repaired_within(stack, nodes, args.interval)
        rows.append({"variant": name, "agents": count, "phase": f"drift {args.drift:.0%}",
                     **drift})
        common.print_table(rows[-1:], COLUMNS)
    finally:
        agents.stop()
    return rows


def run(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-fleet-")
    stack = common.new_stack(workdir)
    rows = []
    try:
        common.start(stack, ["rabbitmq", "redis", "placement", "ironic"])
        ironic = clients.Ironic(stack.ironic_url, SHARD)
        nodes = common.load_many(stack, ironic, args.nodes)
        conf, _ = common.confs(stack, workdir, SHARD, bulk_batch=100)
        started = time.monotonic()
        wiring.reconciler(conf).run()
        print(f"{args.nodes} nodes, their providers made in {time.monotonic() - started:.0f} s "
              f"(load {common.load()})", flush=True)
        for name, sections in variants(args):
            for count in args.agents:
                rows += measure(stack, ironic, nodes, workdir, args, name, sections, count)
        # Each row against the same variant's and phase's row with the fewest agents.
        base = {(r["variant"], r["phase"]): r["total_cpu_s"] for r in rows
                if r["agents"] == args.agents[0]}
        for row in rows:
            row["total_vs_first"] = round(
                row["total_cpu_s"] / max(base[row["variant"], row["phase"]], 0.01), 2)
        print()
        common.print_table(rows, COLUMNS + ("total_vs_first",))
        result = {"nodes": args.nodes, "interval_s": args.interval, "intervals": args.intervals,
                  "drift": args.drift, "set": args.set, "variants": args.variants, "rows": rows,
                  "command": "python -m tools.bench " + " ".join(sys.argv[1:])}
        common.save(result, "fleet")
        return result
    finally:
        stack.stop()
