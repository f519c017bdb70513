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

"""nova-compute HA in two cells, each with its own ring (``tox -e demo-cells``, or
``python -m tools.demo.cells`` where rp_reporter is installed with its nova extra).

A whole nova in its superconductor layout (nova-api, nova-scheduler and the
superconductor on the API database; each cell's conductor and nova-computes on the
cell's own database and bus, no ``[api_database]``), with a second cell added as a
deployment adds one.  Each cell has two nova-compute services with rp_reporter's
driver: one coordination group and one Ironic shard per cell, so each cell is its own
ring.  A server is booted in each cell; then one service of each cell is killed, and
the other service of the same cell moves its server.  Shows where each server went,
and how many calls of a compute service needed the API database (none).
"""

import pathlib
import signal
import tempfile
import time

from tools import clients
from tools import localstack
from tools.demo.common import table
from tools.demo.common import wait
from tools.localstack import nova as nova_stack

CELLS = ("cell1", "cell2")
NODES = 3  # a cell
LEASE, REPORT, SERVICE_DOWN, PERIODIC = 10, 5, 20, 10
UPCALL = "No sql_connection parameter is established"  # oslo.db, no [api_database]


def compute_sections(stack, workdir, host, cell):
    conf = pathlib.Path(workdir, f"rp_reporter-{host}.conf")
    conf.write_text(stack.reporter_conf(
        DEFAULT={"host": host},
        coordination={"backend_url": stack.coordination_url, "group": f"nova-{cell}",
                      "lease": str(LEASE), "heartbeat": "1"}))
    return {"DEFAULT": {"update_resources_interval": str(PERIODIC),
                        "service_down_time": str(SERVICE_DOWN),
                        "report_interval": str(REPORT), "periodic_fuzzy_delay": "0"},
            "rp_reporter": {"peers_from": "coordination", "config_file": str(conf)}}


def host_of(nova, server):
    return nova.server(server)["OS-EXT-SRV-ATTR:host"]


def main():
    localstack.exit_on_sigterm()  # a demo stopped by SIGTERM stops its stack too
    workdir = tempfile.mkdtemp(prefix="rp-demo-cells-")
    stack = localstack.LocalStack(workdir, **localstack.PROFILES["nova-cloud"])
    try:
        stack.start()
        nova_stack.add_cell(stack, CELLS[1])
        nova = clients.Nova(stack)
        placement = clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"),
                                      nova_traits=stack.release.nova_traits)
        fleets, hosts = {}, {}
        for cell in CELLS:
            ironic = clients.Ironic(stack.ironic_url, cell, auth=stack.admin_auth("baremetal"))
            fleets[cell] = ironic.create_many(NODES, resource_class=f"baremetal-{cell}")
            hosts[cell] = [f"{cell}-compute-{i}" for i in (1, 2)]
            for host in hosts[cell]:
                stack.start_compute(host, "rp_reporter", cell, cell=cell,
                                    **compute_sections(stack, workdir, host, cell))
        stack.wait_compute_mapped(*(h for cell in CELLS for h in hosts[cell]), by_service=True)
        flavors = {cell: nova.flavor(f"bm-{cell}", f"CUSTOM_BAREMETAL_{cell.upper()}")
                   for cell in CELLS}
        if not wait(lambda: all(placement.offered(f"CUSTOM_BAREMETAL_{cell.upper()}")
                                == set(fleets[cell]) for cell in CELLS), 180):
            raise SystemExit("nova was not offered every node of both cells within 180 s")
        servers = {}
        for cell in CELLS:
            servers[cell] = nova.boot(f"demo-{cell}", flavors[cell])
            built = nova.wait_built(servers[cell])
            print(f"{cell}: server {servers[cell][:8]} {built['status']} on "
                  f"{built['OS-EXT-SRV-ATTR:host']}", flush=True)
        before = {cell: host_of(nova, servers[cell]) for cell in CELLS}
        started = time.monotonic()
        for cell in CELLS:
            stack.service(f"nova-compute-{before[cell]}").signal(signal.SIGKILL)
        print(f"\nkilled {', '.join(before.values())}; waiting for each cell's survivor",
              flush=True)
        moved = wait(lambda: all(host_of(nova, servers[cell]) not in (None, before[cell])
                                 for cell in CELLS), LEASE + SERVICE_DOWN + 120)
        took = time.monotonic() - started
        rows = [(cell, servers[cell][:8], before[cell], host_of(nova, servers[cell]),
                 host_of(nova, servers[cell]) in hosts[cell]) for cell in CELLS]
        print("\n== each cell's server, after one service of each cell was killed ==")
        print(table(rows, ("cell", "server", "was on", "now on", "within its cell")))
        upcalls = sum(path.read_text(errors="replace").count(UPCALL)
                      for path in pathlib.Path(stack.workdir).glob("nova*.log"))
        print(f"\nre-homed {'within' if moved else 'NOT within'} {took:.0f} s of the kills; "
              f"calls of a compute service needing the API database: {upcalls}")
        if not moved or upcalls or not all(row[-1] for row in rows):
            raise SystemExit(1)
    finally:
        stack.stop()


if __name__ == "__main__":
    main()
