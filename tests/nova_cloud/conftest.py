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

"""The session's whole nova cloud (tests/conftest.py, shared with tests/nova_ha), every
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

import collections
import concurrent.futures
import contextlib
import dataclasses
import importlib.metadata
import json
import os
import pathlib
import subprocess

import pytest

from tests.functional.agents import AgentProcess
from tests.functional.agents import stop_all
from tests.nova_cloud import churn
from tools import clients
from tools import localstack
from tools.localstack import glance
from tools.localstack import neutron
from tools.localstack import process
from tools.localstack import releases
from tools.wait import wait_for

# nova's refresh intervals shortened for the churn measure (test_churn.py): the resource
# tracker every 10 s, its provider cache refreshed from Placement every 30 s.
CHURN_NOVA = {"DEFAULT": {"update_resources_interval": "10"},
              "compute": {"resource_provider_association_refresh": "30"}}
# name -> (nova-compute's driver, how many agents, nova.conf sections over the defaults).
# The -churn topologies are A and C left alone for the whole session, nothing changing
# in Ironic, their churn measured by test_churn.py (run last) over the session.
TOPOLOGIES = {"stock": ("stock", 0, {}), "A": ("stock", 1, {}), "B": ("rp_reporter", 0, {}),
              "C": ("rp_reporter", 2, {}), "A-churn": ("stock", 1, CHURN_NOVA),
              "C-churn": ("rp_reporter", 2, CHURN_NOVA)}
CHURNED = ("A-churn", "C-churn")
NODES = 8  # per topology
RESULTS = pathlib.Path(os.environ.get("RP_BENCH_RESULTS", "bench-results")) / (
    f"nova-cloud{releases.venv_suffix()}.json")  # an older release's: nova-cloud-<release>.json


@dataclasses.dataclass
class Topology:
    name: str
    driver: str
    host: str
    shard: str
    resource_class: str   # as Placement names it
    flavor: str
    ironic: clients.Ironic
    nodes: list
    agents: list
    compute_log: str
    nova_sections: dict = dataclasses.field(default_factory=dict)

    def compute_log_text(self):
        return pathlib.Path(self.compute_log).read_text()


@dataclasses.dataclass
class Cloud:
    stack: localstack.LocalStack
    nova: clients.Nova
    placement: clients.Placement
    topologies: dict      # every topology's agents are stopped with the cloud
    results: dict
    agent_dir: pathlib.Path
    churn_timer: object = None   # test_churn.py's window: its start snapshots, taken
    churn_start: dict = None     # churn.WARM_UP after the cloud is up

    def candidates(self, topology):
        """The providers nova's scheduler would be offered for one unit of the
        topology's class (with the traits nova 34 requires on every request)."""
        return self.placement.offered(topology.resource_class)

    def wait_all_offered(self, topology, timeout=150):
        """Until nova's scheduler is offered every node of the topology (where nova's
        periodic is the reporter: its next run, 60 s, and its start)."""
        wait_for(lambda: self.candidates(topology) == set(topology.nodes), timeout,
                 f"{topology.name}: every node offered to nova's scheduler")


@pytest.fixture(autouse=True)
def _topology_left_clean(request):
    """After a test on one topology (its ``name`` parameter), passed or not: no server
    left on its flavor, no node left in maintenance, so one failure does not become
    every later test's failure."""
    yield
    name = getattr(request.node, "callspec", None) and request.node.callspec.params.get("name")
    if name and "cloud" in request.fixturenames:
        cloud = request.getfixturevalue("cloud")
        topology = cloud.topologies[name]
        cloud.nova.delete_all(topology.flavor)
        for node in topology.nodes:
            if topology.ironic.get(node)["maintenance"]:
                topology.ironic.set_maintenance(node, False)


def start_agents(stack, topology, tmp_path, count):
    return [AgentProcess(stack, topology.shard, tmp_path, f"agent-{topology.name}-{i}",
                         coordination={"group": f"rp-{topology.name}"},
                         reconcile={"interval": 60}).start()
            for i in range(count)]


def add_topology(stack, nova, tmp_path, name, driver, agents, resource_class=None,
                 nova_sections=None):
    """Topology ``name``: its shard with NODES new nodes of ``resource_class`` (its own
    by default), ``agents`` agents on that shard (started first, so their providers
    exist before nova-compute sees the nodes), and its nova-compute started."""
    shard = f"shard-{name.lower()}"
    ironic = clients.Ironic(stack.ironic_url, shard, auth=stack.admin_auth("baremetal"))
    resource_class = resource_class or f"baremetal-{name.lower()}"
    placement_class = "CUSTOM_" + resource_class.upper().replace("-", "_")
    topology = Topology(name, driver, f"compute-{name.lower()}", shard, placement_class,
                        nova.flavor(f"bm-{resource_class}", placement_class), ironic,
                        ironic.create_many(NODES, resource_class=resource_class), [], "",
                        nova_sections or {})
    topology.agents = start_agents(stack, topology, tmp_path, agents)
    topology.compute_log = stack.start_compute(topology.host, driver, shard,
                                               **topology.nova_sections)
    return topology


def pytest_collection_modifyitems(items):
    """The churn measure last: it spans the session (test_churn.py)."""
    items.sort(key=lambda item: item.module.__name__.endswith("test_churn"))


@contextlib.contextmanager
def whole_cloud(workdir, stack=None, names=tuple(TOPOLOGIES)):
    """nova's API and the topologies ``names`` (by default every one) started on
    ``stack`` (by default a new stack, started here); the topologies, and a stack
    started here, stopped on the way out.
    ``cloud.results["setup_repeats"]``: the test clients' requests repeated after a
    dropped connection while it started (none on a stack that serves its load)."""
    own_stack = stack is None
    if own_stack:
        stack = localstack.LocalStack(str(workdir / "cloud"),
                                      **localstack.PROFILES["nova-cloud"])
    topologies = {}
    repeats_before = collections.Counter(clients.REPEATS)
    try:
        if own_stack:
            stack.start()
        # The stack's own image by name: Glance's first is whichever a suite before
        # uploaded last (after tenancy's, every boot asked for its image's trait and
        # found no host).
        nova = clients.Nova(stack, image_name=glance.IMAGE_NAME)
        placement = clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"),
                                      nova_traits=stack.release.nova_traits)
        agent_dir = workdir / "agents"
        agent_dir.mkdir(parents=True, exist_ok=True)
        # Side by side: each topology's start is mostly waiting (its agents' health, its
        # nova-compute's start), one after another they took about 85 s.
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            started = {name: pool.submit(add_topology, stack, nova, agent_dir, name,
                                         *TOPOLOGIES[name][:2],
                                         nova_sections=TOPOLOGIES[name][2])
                       for name in names}
        for name, future in started.items():  # each started one is stopped below
            if future.exception() is None:
                topologies[name] = future.result()
        for future in started.values():
            future.result()  # the first failure, once every start has ended
        stack.wait_compute_mapped(*(topology.host for topology in topologies.values()))
        repeats = dict(clients.REPEATS - repeats_before)
        cloud = Cloud(stack, nova, placement, topologies,
                      {"versions": versions(stack), "setup_repeats": repeats}, agent_dir)
        yield cloud
    finally:
        # All at once: each takes 2-10 s to stop, one after another about 38 s.
        stop_all([agent for topology in topologies.values()
                  for agent in topology.agents])
        if own_stack:
            stack.stop()
        else:  # the cloud goes on without this suite's nova-compute services
            process.stop_all([stack.service(f"nova-compute-{topology.host}")
                              for topology in topologies.values()])


@pytest.fixture(scope="session")
def cloud(request, tmp_path_factory, nova_cloud_stack):
    # The -churn topologies only where the churn is measured: left out (-m every_release),
    # their two nova-computes and three agents would only load the others' stories.
    churn_measured = any(item.module.__name__.endswith("test_churn")
                         for item in request.session.items)
    names = [name for name in TOPOLOGIES if churn_measured or name not in CHURNED]
    with whole_cloud(tmp_path_factory.mktemp("nova-cloud"), nova_cloud_stack,
                     names) as cloud:
        if churn_measured:
            cloud.churn_timer = churn.start_after_warm_up(cloud, CHURNED)
        yield cloud
        # What the tests measured, whether they passed or not.
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(cloud.results, indent=2, sort_keys=True) + "\n")
        print(f"\n{RESULTS}:\n{RESULTS.read_text()}")


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
