"""One whole nova cloud for the session (localstack's nova-cloud profile), every
topology side by side on it, each in its own Ironic shard with its own nova-compute,
resource class and flavor, so one script drives all of them on the same stack:

* ``stock``: nova's own driver, no agents (nova as it ships: the reference);
* ``A``: nova's own driver, rp_reporter agents beside it;
* ``B``: rp_reporter's driver in nova-compute, no agents;
* ``C``: rp_reporter's driver and agents.

nova's scheduler sees every provider; a topology's flavor asks for its own class, so
its servers land only on its own nodes.  The figures the tests measure are written
to bench-results/nova-cloud.json at the end of the session.
"""

import dataclasses
import importlib.metadata
import json
import os
import pathlib
import subprocess

import pytest

from tests.functional.agents import AgentProcess
from tools import fleet
from tools import localstack
from tools import nova_api
from tools.localstack import neutron
from tools.localstack import process

# name -> (nova-compute's driver, how many agents)
TOPOLOGIES = {"stock": ("stock", 0), "A": ("stock", 1), "B": ("rp_reporter", 0),
              "C": ("rp_reporter", 2)}
NODES = 8  # per topology
RESULTS = pathlib.Path(os.environ.get("RP_BENCH_RESULTS", "bench-results")) / "nova-cloud.json"


@dataclasses.dataclass
class Topology:
    name: str
    driver: str
    host: str
    shard: str
    resource_class: str   # as Placement names it
    flavor: str
    ironic: fleet.Ironic
    nodes: list
    agents: list
    compute_log: str

    def compute_log_text(self):
        return pathlib.Path(self.compute_log).read_text()


@dataclasses.dataclass
class Cloud:
    stack: localstack.LocalStack
    nova: nova_api.Nova
    placement: fleet.Placement
    topologies: dict
    results: dict

    def candidates(self, topology):
        """The providers nova's scheduler would be offered for one unit of the
        topology's class (with the traits nova 34 requires on every request)."""
        found = self.placement._call(
            "GET", f"/allocation_candidates?resources={topology.resource_class}:1"
                   "&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED")
        return set(found["provider_summaries"])


def start_agents(stack, topology, tmp_path, count):
    return [AgentProcess(stack, topology.shard, tmp_path, f"agent-{topology.name}-{i}",
                         coordination={"group": f"rp-{topology.name}"},
                         reconcile={"interval": 60}).start()
            for i in range(count)]


@pytest.fixture(scope="session")
def cloud(tmp_path_factory):
    stack = localstack.LocalStack(str(tmp_path_factory.mktemp("cloud")),
                                  **localstack.PROFILES["nova-cloud"])
    topologies = {}
    try:
        stack.start()
        nova = nova_api.Nova(stack)
        placement = fleet.Placement(stack.placement_url, auth=stack.admin_auth("placement"))
        agent_dir = tmp_path_factory.mktemp("agents")
        for name, (driver, agents) in TOPOLOGIES.items():
            shard = f"shard-{name.lower()}"
            ironic = fleet.Ironic(stack.ironic_url, shard, auth=stack.admin_auth("baremetal"))
            rc = f"baremetal-{name.lower()}"
            topology = Topology(
                name, driver, f"compute-{name.lower()}", shard,
                f"CUSTOM_BAREMETAL_{name.upper()}", nova.flavor(f"bm-{name.lower()}",
                                                                f"CUSTOM_BAREMETAL_{name.upper()}"),
                ironic, ironic.create_many(NODES, resource_class=rc), [], "")
            # The agents first: their providers exist before nova-compute sees the nodes.
            topology.agents = start_agents(stack, topology, agent_dir, agents)
            topology.compute_log = stack.start_compute(topology.host, driver, shard)
            topologies[name] = topology
        for topology in topologies.values():
            stack.wait_compute_mapped(topology.host)
        cloud = Cloud(stack, nova, placement, topologies, {"versions": versions(stack)})
        yield cloud
        # What the tests measured, whether they passed or not.
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(cloud.results, indent=2, sort_keys=True) + "\n")
        print(f"\n{RESULTS}:\n{RESULTS.read_text()}")
    finally:
        for topology in topologies.values():
            for agent in topology.agents:
                agent.stop()
        stack.stop()


def versions(stack):
    """Each service's package version, as the stack ran it."""
    def venv_version(python, package):
        return subprocess.run([python, "-c", "import importlib.metadata as m; "
                               f"print(m.version({package!r}))"],
                              capture_output=True, text=True, check=True).stdout.strip()
    stack_python = process.venv_bin("python")
    found = {package: venv_version(stack_python, package)
             for package in ("nova", "openstack-placement", "ironic", "keystone", "glance")}
    found["neutron"] = venv_version(neutron.bin_path("python"), "neutron")
    found["nova (nova-compute)"] = importlib.metadata.version("nova")
    found["rp_reporter"] = importlib.metadata.version("rp_reporter")
    return found
