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

"""The demo with a whole nova in front (``tox -e demo-nova``, or ``python -m
tools.demo.nova`` where rp_reporter is installed with its nova extra): Keystone, Glance,
Neutron, Placement and Ironic on MariaDB, nova's services by their own commands, six
sample nodes, two rp-reporter-agent processes on an etcd ring and one nova-compute
with rp_reporter's driver (topology C).  A server is booted through nova-api onto a
node the agents reported; a node put into maintenance leaves what nova is offered;
the server's delete frees its node, and the demo times how soon nova is offered it
again.
"""

import tempfile
import time

from tools import clients
from tools import localstack
from tools.demo.common import start_agent
from tools.demo.common import table
from tools.demo.common import wait

SHARD = "demo"
RESOURCE_CLASS = "baremetal-gold"
PLACEMENT_CLASS = "CUSTOM_BAREMETAL_GOLD"


def available(node):
    """The node is available again in Ironic, its instance gone."""
    return node["provision_state"] == "available" and not node["instance_uuid"]


def main():
    localstack.exit_on_sigterm()  # a demo stopped by SIGTERM stops its stack too
    workdir = tempfile.mkdtemp(prefix="rp-demo-nova-")
    stack = localstack.LocalStack(workdir, **localstack.PROFILES["nova-cloud"])
    agents = []
    try:
        stack.start()
        ironic = clients.Ironic(stack.ironic_url, SHARD, auth=stack.admin_auth("baremetal"))
        placement = clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"),
                                      nova_traits=stack.release.nova_traits)
        nova = clients.Nova(stack)
        nodes = ironic.create_many(6, resource_class=RESOURCE_CLASS)
        print(f"\n{len(nodes)} nodes in Ironic (class {RESOURCE_CLASS}); starting two agents "
              "and nova-compute with compute_driver = rp_reporter.IronicDriver", flush=True)
        agents = [start_agent(stack, workdir, f"agent-{i}", SHARD)[1] for i in range(2)]
        stack.start_compute("compute-demo", "rp_reporter", SHARD)
        stack.wait_compute_mapped("compute-demo")
        flavor = nova.flavor("bm-gold", PLACEMENT_CLASS)
        if not wait(lambda: placement.offered(PLACEMENT_CLASS) == set(nodes), 120):
            raise SystemExit("nova was not offered every node within 120 s")

        started = time.monotonic()
        server = nova.boot("demo-server", flavor)
        built = nova.wait_built(server)
        node = built["OS-EXT-SRV-ATTR:hypervisor_hostname"]
        print(f"\n== a server booted through nova-api ==\n{server}: {built['status']} in "
              f"{time.monotonic() - started:.1f} s on node {node[:8]} "
              f"(host {built['OS-EXT-SRV-ATTR:host']})")

        free = next(n for n in nodes if n != node)
        started = time.monotonic()
        ironic.set_maintenance(free, True)
        gone = wait(lambda: free not in placement.offered(PLACEMENT_CLASS), 10)
        print(f"\n== maintenance ==\nnode {free[:8]} into maintenance: "
              + (f"no longer offered to nova's scheduler after "
                 f"{1000 * (time.monotonic() - started):.0f} ms" if gone
                 else "still offered after 10 s"))

        nova.delete(server)
        usable = wait(lambda: available(ironic.get(node)), 120)
        usable_at = time.monotonic()
        back = usable and wait(lambda: node in placement.offered(PLACEMENT_CLASS), 60)
        print(f"\n== the freed node ==\nnode {node[:8]} cleaned and available in Ironic; "
              + (f"offered to nova again {1000 * (time.monotonic() - usable_at):.0f} ms later"
                 if back else "not offered again within 60 s"))
        rows = []
        for uuid in nodes:
            rp = placement.provider(uuid)
            total, reserved, _ = rp["inventories"][PLACEMENT_CLASS]
            rows.append((uuid[:8], ironic.get(uuid)["provision_state"]
                         + (" +maint" if uuid == free else ""), reserved,
                         " ".join(sorted(t for t in rp["traits"] if t in (
                             "OWNER_NOVA", "COMPUTE_NODE", "CUSTOM_RPR_MANAGED")))))
        print("\n== Placement now holds ==")
        print(table(rows, ("node", "ironic state", "reserved", "traits")))
    finally:
        localstack.terminate(agents)
        stack.stop()


if __name__ == "__main__":
    main()
