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

"""Fault soak: one agent through a compressed day and more of long outages.

    python -m tools.bench.fault_soak              # defaults below: about 15 minutes
    python -m tools.bench.fault_soak --outage 30 --up 20 --nodes 100   # a quick look

Real Placement, Ironic, RabbitMQ and Redis on loopback; one rp-reporter-agent
on a Redis-backed ring.  Time is compressed by configuration: every period the
agent waits (reconcile interval, backoff caps, Placement's retry backoff) is its
production default divided by --compress, so one real second stands for
--compress seconds of a production day.  The lease is not compressed (it guards
real clocks and real timeouts).

Each dependency in turn (coordination, Placement, Ironic, the broker) is down
for --outage real seconds, with --up seconds between outages.  Nodes change in
Ironic all along (a few just after each outage begins, one every
--change-every seconds between outages), so every outage leaves work to repair;
a node changed at the start of a Placement outage fails hundreds of times
before it succeeds.
Every 5 s the agent's RSS, OS threads and /healthz are sampled.  At the end,
once the agent is idle: a dry-run reconcile counts the nodes Placement does not
hold exactly (want 0), /healthz must answer 200, no agent thread may have died,
and the RSS at the end is compared with the RSS after the initial sync.

Writes bench-results/fault_soak.json; exit 0 only if all of that holds.
"""

import argparse
import json
import os
import random
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

# Production defaults of what --compress divides: [reconcile] interval,
# [agent] retry_backoff_max, [placement] request_backoff_max.
INTERVAL, RETRY_MAX, REQUEST_BACKOFF_MAX = 600.0, 30.0, 4.0
LEASE, HEARTBEAT = 10.0, 1.0
OUTAGES = ("redis", "placement", "ironic", "rabbitmq")  # the stack's service names
BURST = 5  # nodes changed at the start of each outage (when Ironic is up)


class Agent:
    def __init__(self, stack, workdir, compress):
        self.port = localstack.free_port()
        self.conf = os.path.join(workdir, "agent.conf")
        with open(self.conf, "w") as f:
            f.write(stack.reporter_conf(
                DEFAULT={"host": "fault-soak"}, ironic={"shard": "fault-soak"},
                coordination={"backend_url": stack.redis_url, "lease": LEASE,
                              "heartbeat": HEARTBEAT},
                reconcile={"interval": max(1, round(INTERVAL / compress)), "jitter": 0.1},
                # One attempt per sync: the work queue's backoff is what is soaked.
                placement={"request_attempts": 1,
                           "request_backoff_max": REQUEST_BACKOFF_MAX / compress},
                agent={"metrics_bind": f"127.0.0.1:{self.port}",
                       "retry_backoff_max": max(0.1, RETRY_MAX / compress)}))
        self.log_path = os.path.join(workdir, "agent.log")
        self.proc = None

    def start(self):
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rp_reporter.agent", "--config-file", self.conf],
                stdout=log, stderr=subprocess.STDOUT)

    def health(self):
        return clients.health(self.port, timeout=2)

    def metric(self, name):
        """The sum of a metric's samples over all labels (0 while the agent is silent)."""
        return sum(v for k, v in clients.metrics(self.port).items() if k.split("{")[0] == name)

    def rss_mib(self):
        """The agent's resident memory in MiB (0 once it is gone)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def threads(self):
        """The agent's OS threads (0 once it is gone)."""
        try:
            return len(os.listdir(f"/proc/{self.proc.pid}/task"))
        except OSError:
            return 0

    def log_lines(self, text):
        with open(self.log_path) as f:
            return sum(text in line for line in f)


def wait(check, timeout, what):
    """When ``check()`` first held (an exception counts as not yet: a dependency may be
    down); the soak ends with one line if it never does."""
    try:
        return wait_for(check, timeout, what, interval=0.5, ignore=Exception)
    except NotSeen:
        raise SystemExit(f"fault soak: {what} did not come up within {timeout} s") from None


def idle(agent):
    return (agent.health()[0] == 200 and agent.metric("rp_reporter_queue_depth") == 0
            and not agent.metric("rp_reporter_reconcile_running"))


class Changes:
    """Changes to the fleet's nodes in Ironic (maintenance and resource class)."""

    def __init__(self, ironic, nodes, seed=7):
        self.ironic, self.nodes = ironic, nodes
        self.rng = random.Random(seed)
        self.made = self.refused = 0

    def one(self):
        node = self.rng.choice(self.nodes)
        try:
            if self.rng.random() < 0.5:
                self.ironic.set_maintenance(node, self.rng.random() < 0.5)
            else:
                self.ironic.patch(node, resource_class=self.rng.choice(("soak-a", "soak-b")))
            self.made += 1
        except (AssertionError, OSError):  # Ironic down or busy: the soak goes on
            self.refused += 1

    def burst(self, count):
        for _ in range(count):
            self.one()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--compress", type=float, default=300,
                        help="production seconds per real second (default 300: the "
                             "reconcile interval 2 s, the retry cap 0.1 s)")
    parser.add_argument("--outage", type=float, default=90, help="real seconds each")
    parser.add_argument("--up", type=float, default=45, help="real seconds between outages")
    parser.add_argument("--change-every", type=float, default=2.0, help="real seconds")
    args = parser.parse_args(argv)

    workdir = tempfile.mkdtemp(prefix="rp-fault-soak-")
    stack = localstack.LocalStack(workdir)
    agent = None
    try:
        stack.start()
        ironic = clients.Ironic(stack.ironic_url, "fault-soak")
        nodes = ironic.create_many(args.nodes)
        agent = Agent(stack, workdir, args.compress)
        agent.start()
        wait(lambda: idle(agent) and agent.metric("rp_reporter_nodes_owned") == args.nodes,
             600, "the initial sync")
        print(f"{time.strftime('%H:%M:%S')} initial sync of {args.nodes} nodes done", flush=True)
        threads_start, rss_start = agent.threads(), agent.rss_mib()
        samples, outages = [], []
        changes = Changes(ironic, nodes)
        stop_sampling = threading.Event()

        def sample():
            while not stop_sampling.wait(5):
                samples.append({"t": round(time.monotonic() - soak_started, 1),
                                "rss_mib": round(agent.rss_mib(), 1),
                                "threads": agent.threads(), "healthz": agent.health()[0]})

        def changing(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                changes.one()
                time.sleep(max(0, min(args.change_every, end - time.monotonic())))

        soak_started = time.monotonic()
        threading.Thread(target=sample, daemon=True).start()
        for service in OUTAGES:
            changing(args.up)
            went = time.monotonic()
            stack.stop([service])
            if service != "ironic":  # work the outage leaves behind (Ironic: none to make)
                changes.burst(BURST)
            print(f"{time.strftime('%H:%M:%S')} {service} down", flush=True)
            # The broker's outage costs the fast path only: the reconcile loop carries
            # on, so /healthz stays 200 (RPReporterNotificationsSilent is its alert).
            unhealthy = (None if service == "rabbitmq" else
                         wait(lambda: agent.health()[0] != 200, 60, f"{service} noticed"))
            time.sleep(max(0, went + args.outage - time.monotonic()))
            stack.start([service])
            back = time.monotonic()
            healthy = wait(lambda: agent.health()[0] == 200, 300, f"healthy after {service}")
            print(f"{time.strftime('%H:%M:%S')} {service} back; agent healthy "
                  f"{healthy - back:.1f} s later", flush=True)
            outages.append({"service": service, "down_s": round(back - went, 1),
                            "noticed_after_s": unhealthy and round(unhealthy - went, 1),
                            "healthy_after_return_s": round(healthy - back, 1)})
        changing(args.up)
        wait(lambda: idle(agent), 300, "the agent idle")
        time.sleep(2 * args.up / 3)  # a few more passes, nothing changing
        wait(lambda: idle(agent), 300, "the agent idle")
        stop_sampling.set()
        real_seconds = time.monotonic() - soak_started

        check = wiring.reconciler(rp_conf.load(["--config-file", agent.conf])).run(dry_run=True)
        inexact = sorted(r.uuid for r in check.results if r.ops)
        status, body = agent.health()
        result = {
            "nodes": args.nodes, "compress": args.compress,
            "real_minutes": round(real_seconds / 60, 1),
            "simulated_hours": round(real_seconds * args.compress / 3600, 1),
            "outages": outages,
            "changes": changes.made, "changes_refused": changes.refused,
            "sync_failures": int(agent.metric("rp_reporter_sync_failures_total")),
            "threads_restarted": int(agent.metric("rp_reporter_threads_restarted_total")),
            "os_threads_start": threads_start, "os_threads_end": agent.threads(),
            "rss_mib_start": round(rss_start, 1), "rss_mib_end": round(agent.rss_mib(), 1),
            "rss_mib_max": max(s["rss_mib"] for s in samples),
            "healthz_end": status, "healthz_end_body": body,
            "tracebacks_in_log": agent.log_lines("Traceback"),
            "providers_inexact_at_end": len(inexact), "inexact": inexact[:20],
            "agent_alive_at_end": agent.proc.poll() is None,
            "samples": samples,
        }
        print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
        common.save(result, "fault_soak")
        ok = (not inexact and status == 200 and result["threads_restarted"] == 0
              and result["agent_alive_at_end"] and not result["tracebacks_in_log"])
        return 0 if ok else 1
    finally:
        if agent and agent.proc:
            localstack.terminate([agent.proc])
        stack.stop()


if __name__ == "__main__":
    sys.exit(main())
