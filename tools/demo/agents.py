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

"""The main job on an embedded default: a local Placement, Ironic, RabbitMQ and Redis,
sample nodes, and three rp-reporter-agent processes sharing them on a hash ring.
Shows who owns what, what Placement holds, and one live change arriving through
Ironic's notifications.

    tox -e demo            (or: python -m tools.demo.agents)

With a whole nova in front, a server booted onto a node the agents reported:
tools/demo/nova.py (tox -e demo-nova).
"""

import json
import subprocess
import sys
import tempfile
import time

from tools import clients
from tools import localstack
from tools.demo.common import start_agent
from tools.demo.common import table
from tools.demo.common import wait

SAMPLE = [  # (resource_class, state, traits, maintenance), three of each
    ("baremetal-gold", "available", (), False),
    ("baremetal-gold", "available", ("CUSTOM_GPU",), False),
    ("baremetal-gold", "active", (), False),
    ("baremetal-gold", "available", (), True),
    ("Baremetal.Silver XL", "available", (), False),
    ("baremetal-silver", "manageable", ("HW_CPU_X86_AVX2",), False),
    (None, "available", (), False),
]
AGENTS = ("agent-a", "agent-b", "agent-c")


def rp_reporter(conf, *args):
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file", conf,
                           *args, "-f", "json"], capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"rp-reporter {' '.join(args)}: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def main():
    localstack.exit_on_sigterm()  # a demo stopped by SIGTERM stops its stack too
    workdir = tempfile.mkdtemp(prefix="rp-demo-")
    stack = localstack.LocalStack(workdir)
    agents = []
    try:
        stack.start()
        ironic = clients.Ironic(stack.ironic_url, "demo")
        placement = clients.Placement(stack.placement_url)
        nodes = []
        for _ in range(3):
            for rc, state, traits, maint in SAMPLE:
                nodes.append((ironic.create(resource_class=rc, state=state, traits=traits,
                                            maintenance=maint), rc, state, maint))
        print(f"\n{len(nodes)} sample nodes in Ironic; starting {len(AGENTS)} agents on a "
              f"Redis-backed ring", flush=True)
        confs = {}
        for name in AGENTS:
            confs[name], agent = start_agent(
                stack, workdir, name, "demo",
                coordination={"backend_url": stack.redis_url})
            agents.append(agent)
        reportable = [n for n, rc, _, _ in nodes if rc]
        if not wait(lambda: all(placement.provider(n) for n in reportable), 60):
            raise SystemExit("the agents did not sync the sample nodes within 60 s")
        time.sleep(2)  # let every agent see every member
        print("\n== rp-reporter ring show ==")
        rows = rp_reporter(confs["agent-a"], "ring", "show")
        print(table([tuple(r.values()) for r in rows], tuple(rows[0])))
        owners = {r["node"]: r["owner"] for r in rp_reporter(confs["agent-a"], "ring", "show",
                                                             "--nodes")}
        rows = []
        for uuid, rc, state, maint in nodes:
            rp = placement.provider(uuid)
            inv = (" ".join(f"{c} reserved={r}" for c, (_, r, _) in rp["inventories"].items())
                   if rp else "(no provider: no resource_class)")
            traits = " ".join(sorted(t for t in rp["traits"] if not t.startswith("CUSTOM_RPR_"))
                              ) if rp else ""
            rows.append((uuid[:8], owners[uuid], rc, state + (" +maint" if maint else ""), inv,
                         traits))
        print("\n== Placement now holds ==")
        print(table(rows, ("node", "owner", "ironic resource_class", "ironic state",
                           "placement inventory", "traits")))
        node = next(uuid for uuid, rc, state, maint in nodes
                    if rc and state == "available" and not maint)
        started = time.monotonic()
        ironic.set_maintenance(node, True)
        arrived = wait(lambda: placement.provider(node)["inventories"][
            "CUSTOM_BAREMETAL_GOLD"][1] == 1, 10)
        print(f"\n== live change ==\nmaintenance on {node[:8]} (owner {owners[node]}): "
              + (f"Placement reserved it {1000 * (time.monotonic() - started):.0f} ms after "
                 "the Ironic API call returned" if arrived else "not seen within 10 s"))
    finally:
        localstack.terminate(agents)
        stack.stop()


if __name__ == "__main__":
    main()
