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

"""Bare-metal tenancy through a whole real nova (``[tenancy] enabled``).

Projects P, O, L and Q of the stack's Keystone; five nodes in their own Ironic shard
behind a stock nova-compute, with one agent beside it that keeps the tenant
aggregates and the public trait:

* N1 owned by P; N2 owned by O and leased to L; N3 owned by O; N4 and N5 nobody's;
* a private flavor for P, O and L that forbids the public trait (each project's
  dedicated flavor), and a public flavor that requires it;
* N1, N2, N3 and N5 carry CUSTOM_TENANCY_EXTRA, which one image requires.

nova's scheduler runs with ``limit_tenants_to_placement_aggregate`` (the profile's
nova.conf).  Servers are booted through nova-api as each project's own user, and
where they land is read as nova's admin.  The figures (how long an owner change
takes to reach the scheduler) go to bench-results/nova-tenancy.json.
"""

import json
import os
import pathlib
import time

import pytest

from rp_reporter import tenancy
from tests.functional.agents import AgentProcess
from tools import clients
from tools.localstack import glance
from tools.localstack import keystone
from tools.localstack import releases
from tools.wait import wait_for

SHARD, HOST = "shard-tenancy", "compute-tenancy"
RESOURCE_CLASS = "baremetal-tenancy"
PLACEMENT_CLASS = "CUSTOM_BAREMETAL_TENANCY"
PUBLIC = tenancy.PUBLIC_TRAIT
EXTRA = "CUSTOM_TENANCY_EXTRA"
# nova-compute's own refreshes shortened, so "past its association refresh" is a wait
# of seconds: its resource tracker every 10 s, its provider cache every 30 s.
COMPUTE = {"DEFAULT": {"update_resources_interval": "10"},
           "compute": {"resource_provider_association_refresh": "30"}}
NO_VALID_HOST = "No valid host was found"
RESULTS = pathlib.Path(os.environ.get("RP_BENCH_RESULTS", "bench-results")) / (
    f"nova-tenancy{releases.venv_suffix()}.json")  # an older release's: nova-tenancy-<release>.json


class Tenancy:
    """The test's cloud: the projects' ids and clients, the nodes, the flavors."""

    def __init__(self, stack, workdir):
        self.stack = stack
        self.admin = clients.Nova(stack)
        self.placement = clients.Placement(stack.placement_url,
                                           auth=stack.admin_auth("placement"),
                                           nova_traits=stack.release.nova_traits)
        self.ironic = clients.Ironic(stack.ironic_url, SHARD, auth=stack.admin_auth("baremetal"))
        self.projects, self.as_project = {}, {}
        for name in "POLQ":
            project, auth = keystone.tenant(stack, f"tenancy-{name}")
            self.projects[name], self.as_project[name] = project, clients.Nova(stack, auth)
        _, q_admin = keystone.tenant(stack, "tenancy-Q", role="admin", user="tenancy-Q-admin")
        self.q_admin = clients.Nova(stack, q_admin)  # an admin user, scoped to Q
        self.agent = AgentProcess(stack, SHARD, workdir, "agent-tenancy",
                                  coordination={"group": "rp-tenancy"},
                                  reconcile={"interval": 60},
                                  tenancy={"enabled": "True"},
                                  # the public trait is written to Ironic nodes
                                  ironic=stack.credentials("rp-system-member"),
                                  nova=stack.credentials("rp-admin")).start()
        self.nodes = {}
        for name in ("N1", "N2", "N3", "N4", "N5"):
            traits = [] if name == "N4" else [EXTRA]
            self.nodes[name] = self.ironic.create(resource_class=RESOURCE_CLASS, traits=traits)
        owner_p, owner_o, lessee_l = (self.projects[n] for n in "POL")
        self.ironic.patch(self.nodes["N1"], owner=owner_p)
        self.ironic.patch(self.nodes["N2"], owner=owner_o, lessee=lessee_l)
        self.ironic.patch(self.nodes["N3"], owner=owner_o)
        self.compute_log = stack.start_compute(HOST, "stock", SHARD, **COMPUTE)
        stack.wait_compute_mapped(HOST)
        # A disk of 1 in the flavor (nova lets users boot from an image only so), none
        # asked of Placement.
        self.public = self.admin.flavor("bm-tenancy-public", PLACEMENT_CLASS,
                                        {f"trait:{PUBLIC}": "required"}, disk=1)
        self.dedicated = self.admin.flavor("bm-tenancy-dedicated", PLACEMENT_CLASS,
                                           {f"trait:{PUBLIC}": "forbidden"},
                                           projects=[owner_p, owner_o, lessee_l], disk=1)
        self.extra_image = glance.upload_image(stack, "tenancy-extra",
                                               {f"trait:{EXTRA}": "required"})
        self.servers, self.results = [], {}

    def node(self, uuid):
        return next(name for name, node in self.nodes.items() if node == uuid)

    def tenant_aggregates(self):
        """{project name ("P"...): its tenant aggregate's uuid} as nova has them."""
        names = {project: name for name, project in self.projects.items()}
        return {names[tenancy.tenant_project(a)]: a["uuid"] for a in self.admin.aggregates()
                if tenancy.tenant_project(a) in names}

    def marks(self, name):
        """(has the public trait, the provider's aggregates) as nova's scheduler sees them."""
        node = self.nodes[name]
        return PUBLIC in self.placement.provider_trait_names(node), self.placement.aggregates(node)

    def settled(self):
        """Every node offered and carrying what tenancy decides for it."""
        if self.placement.offered(PLACEMENT_CLASS) != set(self.nodes.values()):
            return False
        wanted = {"N1": "P", "N2": "L", "N3": "O"}
        tenants = self.tenant_aggregates()
        for name in self.nodes:
            public, aggregates = self.marks(name)
            project = wanted.get(name)
            tenant = tenants.get(project)
            if public != (project is None) or aggregates != ({tenant} if tenant else set()):
                return False
        return True

    def boot(self, project, flavor, image=None, nova=None):
        """Where a server of ``project`` lands: a node's name, or nova's fault."""
        nova = nova or self.as_project[project]
        server = nova.boot(f"tenancy-{project}-{len(self.servers)}", flavor, image=image)
        self.servers.append(server)
        built = self.admin.wait_built(server, timeout=300)
        if built["status"] == "ERROR":
            return (built.get("fault") or {}).get("message", "ERROR without a fault")
        return self.node(built["OS-EXT-SRV-ATTR:hypervisor_hostname"])

    def delete_servers(self):
        for server in self.servers:
            self.admin.delete(server)
        for server in self.servers:
            self.admin.wait_gone(server)
        self.servers = []
        wait_for(lambda: all(self.ironic.get(n)["provision_state"] == "available"
                             for n in self.nodes.values()), 120, "every node available again")
        # Available in Ironic is not yet offered: the freed node's inventory and the
        # server's allocation reach Placement a moment later (a CI run booted Q's next
        # server into that moment and got "No valid host").
        wait_for(self.settled, 60, "every node offered with its tenancy again", interval=0.5)


@pytest.fixture(scope="module")
def cloud(nova_cloud_stack, tmp_path_factory):
    made = None
    try:
        made = Tenancy(nova_cloud_stack, tmp_path_factory.mktemp("tenancy"))
        started = time.monotonic()
        wait_for(made.settled, 180, "every node offered with its tenancy", interval=1)
        made.results["settled_after_start_s"] = round(time.monotonic() - started, 1)
        yield made
    finally:
        if made is not None:
            made.agent.stop()
            RESULTS.parent.mkdir(parents=True, exist_ok=True)
            RESULTS.write_text(json.dumps(made.results, indent=2, sort_keys=True) + "\n")
        nova_cloud_stack.service(f"nova-compute-{HOST}").stop()


@pytest.fixture(autouse=True)
def _no_server_left(cloud):
    """After each test, passed or not: its servers deleted and every node available."""
    yield
    cloud.delete_servers()


@pytest.mark.every_release
def test_each_project_lands_only_on_the_nodes_it_may_deploy_on(cloud):
    assert cloud.boot("P", cloud.dedicated) == "N1"
    assert NO_VALID_HOST in cloud.boot("P", cloud.dedicated)   # N1 taken: nothing else
    assert NO_VALID_HOST in cloud.boot("P", cloud.public)      # P is confined to its own
    assert cloud.boot("L", cloud.dedicated) == "N2"
    assert cloud.boot("O", cloud.dedicated) == "N3"            # never the leased N2


def test_a_project_without_nodes_gets_the_public_ones_and_no_more(cloud):
    assert {cloud.boot("Q", cloud.public), cloud.boot("Q", cloud.public)} == {"N4", "N5"}
    assert NO_VALID_HOST in cloud.boot("Q", cloud.public)
    assert not cloud.as_project["Q"].sees_flavor(cloud.dedicated)
    assert cloud.as_project["P"].sees_flavor(cloud.dedicated)


def test_an_image_requiring_a_trait_never_takes_q_to_a_claimed_node(cloud):
    # N1-N3 have the trait but are claimed; N5 is public and has it; N4 lacks it.
    assert cloud.boot("Q", cloud.public, image=cloud.extra_image) == "N5"
    assert NO_VALID_HOST in cloud.boot("Q", cloud.public, image=cloud.extra_image)


def test_an_admin_of_q_aiming_at_a_claimed_node_is_refused(cloud):
    server = cloud.q_admin.boot("tenancy-Q-forced", cloud.public, host=HOST,
                                node=cloud.nodes["N1"])
    cloud.servers.append(server)
    built = cloud.admin.wait_built(server, timeout=300)
    assert built["status"] == "ERROR"
    assert NO_VALID_HOST in built["fault"]["message"]


def test_an_owner_set_and_unset_takes_the_node_from_q_and_gives_it_back(cloud):
    taken = cloud.boot("Q", cloud.public)
    assert taken in ("N4", "N5")
    other = "N4" if taken == "N5" else "N5"
    changed = time.monotonic()
    cloud.ironic.patch(cloud.nodes[other], owner=cloud.projects["P"])
    p_aggregate = cloud.tenant_aggregates()["P"]
    wait_for(lambda: cloud.marks(other) == (False, {p_aggregate}), 30, "the claim in Placement",
             interval=0.1)
    claimed_s = time.monotonic() - changed
    assert NO_VALID_HOST in cloud.boot("Q", cloud.public)
    changed = time.monotonic()
    cloud.ironic.patch(cloud.nodes[other], owner=None)
    wait_for(lambda: cloud.marks(other) == (True, set()), 30, "public again in Placement",
             interval=0.1)
    freed_s = time.monotonic() - changed
    assert cloud.boot("Q", cloud.public) == other
    cloud.results["owner_set_to_scheduler_s"] = round(claimed_s, 2)
    cloud.results["owner_unset_to_scheduler_s"] = round(freed_s, 2)


def test_ironics_automatic_lessee_leaves_the_node_public(cloud):
    where = cloud.boot("Q", cloud.public)
    node = cloud.ironic.get(cloud.nodes[where])
    assert node["lessee"] == cloud.projects["Q"]   # Ironic's automatic lessee, from nova
    assert cloud.marks(where) == (True, set())     # not Q's claim: still public
    cloud.delete_servers()
    assert cloud.ironic.get(cloud.nodes[where])["lessee"] is None
    assert cloud.marks(where) == (True, set())


def test_the_marks_outlive_nova_computes_restart_and_its_refreshes(cloud):
    cloud.agent.stop()  # nova alone now: whatever it would undo stays undone
    try:
        cloud.stack.start_compute(HOST, "stock", SHARD, **COMPUTE)
        time.sleep(45)  # past its association refresh (30 s) and several periodics (10 s)
        assert cloud.settled()
    finally:
        cloud.agent.start()
