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

"""The operator guide's migration path (doc/source/admin/moving.md) on a whole nova with
servers running (issue item 5): two nova-compute services on their own shards share one flavor, and
the path goes stock -> A (agents started) -> C (each service switched to rp_reporter's
driver, one at a time) -> back (each switched back, one at a time, then the agents
stopped).  After every step, once the restarted service has reported: every server
still ACTIVE on its node and host, its allocation unchanged, every node with exactly
one provider (uuid and name the node's) and one compute node record on its own
service, no provider deleted.  At the end a new server boots and is deleted."""

import datetime

import pytest

from tests.nova_cloud.conftest import add_topology
from tests.nova_cloud.conftest import start_agents
from tests.nova_cloud.test_topologies import all_providers
from tests.nova_cloud.test_topologies import providers_of
from tools.wait import wait_for

CLASS = "baremetal-migrating"
SERVERS = 4


def switch(cloud, topology, driver):
    """Restart the service on ``driver``; return once it has reported its nodes."""
    restarted = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    topology.driver = driver
    cloud.stack.start_compute(topology.host, driver, topology.shard, **topology.nova_sections)
    wait_for(lambda: cloud.nova.compute_up(topology.host, since=restarted), 180,
             f"{topology.host} up on {driver} and reported")


@pytest.fixture(scope="module")
def services(cloud):
    pair = [add_topology(cloud.stack, cloud.nova, cloud.agent_dir, name, "stock", 0, CLASS)
            for name in ("M1", "M2")]
    for topology in pair:
        cloud.topologies[topology.name] = topology  # the cloud stops their agents
    cloud.stack.wait_compute_mapped(*(topology.host for topology in pair))
    return pair


def test_stock_to_a_to_c_and_back_one_service_at_a_time_with_servers_running(cloud, services):
    nodes = [n for t in services for n in t.nodes]
    flavor = services[0].flavor
    wait_for(lambda: len(cloud.candidates(services[0])) == len(nodes), 150,
             "every node of both services offered")
    servers = [cloud.nova.boot(f"migrating-{i}", flavor) for i in range(SERVERS)]
    placed = {}
    for server in servers:
        built = cloud.nova.wait_built(server)
        assert built["status"] == "ACTIVE", built.get("fault")
        placed[server] = (built["OS-EXT-SRV-ATTR:host"],
                          built["OS-EXT-SRV-ATTR:hypervisor_hostname"])
    providers = all_providers(cloud)
    home = {n: t.host for t in services for n in t.nodes}
    steps = []

    def check(step):
        for server, (host, node) in placed.items():
            found = cloud.nova.server(server)
            assert found["status"] == "ACTIVE", (step, server, found.get("fault"))
            assert (found["OS-EXT-SRV-ATTR:host"],
                    found["OS-EXT-SRV-ATTR:hypervisor_hostname"]) == (host, node), step
            assert cloud.placement.allocations(server) == {
                node: {services[0].resource_class: 1}}, step
        assert providers_of(cloud, nodes) == {n: [n] for n in nodes}, step
        assert all_providers(cloud) >= providers, step  # none deleted
        records = cloud.nova.compute_nodes()
        for node in nodes:
            assert records.get(node) == [home[node]], (step, node, records.get(node))
        steps.append(step)

    check("stock")
    for topology in services:  # A: the agents beside stock nova
        topology.agents = start_agents(cloud.stack, topology, cloud.agent_dir, 1)
    wait_for(lambda: all("CUSTOM_RPR_MANAGED" in cloud.placement.provider_trait_names(n)
                         for n in nodes), 120, "the agents adopted every provider")
    check("A")
    for topology in services:  # C: one service at a time
        switch(cloud, topology, "rp_reporter")
        check(f"C: {topology.host} on rp_reporter's driver")
    for topology in services:  # back: one service at a time, then the agents go
        switch(cloud, topology, "stock")
        check(f"back: {topology.host} on nova's driver")
    for topology in services:
        for agent in topology.agents:
            agent.stop()
    check("back: agents stopped")

    server = cloud.nova.boot("after-migration", flavor)
    assert cloud.nova.wait_built(server)["status"] == "ACTIVE"
    for server_id in [*servers, server]:
        cloud.nova.delete(server_id)
    cloud.results["migration"] = {"steps": steps, "servers": SERVERS,
                                  "nodes": len(nodes), "all_checks_held": True}
    for topology in services:  # done: their load is not the later tests'
        cloud.stack.service(f"nova-compute-{topology.host}").stop()
