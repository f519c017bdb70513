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

"""Servers boot through nova-api onto the nodes each topology reports, with nova's
scheduler and filters as they ship (issue items 1 and 2).

Waits for "schedulable again" allow nova's periodic (60 s) where no agent runs
(stock, B): that is how long nova itself takes."""

import pytest

from tools.localstack import releases
from tools.wait import wait_for

# Traits nova's resource tracker puts on every provider of its nodes: COMPUTE_NODE, and
# OWNER_NOVA from nova 34 on (its scheduler asks every root provider for it).
NOVA_TRAITS = {"COMPUTE_NODE", *releases.current().nova_traits}
PERIODIC_WAIT = 150  # nova's 60 s periodic, twice, and its start


def providers_of(cloud, nodes):
    """{node: provider} for these nodes, reading Placement's providers by uuid and by
    name (a provider duplicated under another uuid would show by name)."""
    found = {}
    for node in nodes:
        by_name = cloud.placement._call("GET", f"/resource_providers?name={node}")
        found[node] = [rp["uuid"] for rp in by_name["resource_providers"]]
    return found


def all_providers(cloud):
    return {rp["uuid"] for rp in
            cloud.placement._call("GET", "/resource_providers")["resource_providers"]}


@pytest.mark.every_release
@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_a_server_boots_on_the_node_and_the_node_is_schedulable_again_after_delete(
        cloud, name):
    topology = cloud.topologies[name]
    cloud.wait_all_offered(topology)
    # Every topology's nodes reported first: the session's cloud may have just started
    # (its first test on 2025.1), and a provider another topology adds meanwhile is not
    # one this boot left behind.
    wait_for(lambda: all(providers_of(cloud, t.nodes) == {n: [n] for n in t.nodes}
                         for t in cloud.topologies.values()), PERIODIC_WAIT,
             "every topology's nodes reported")
    before = all_providers(cloud)

    server = cloud.nova.boot(f"boot-{name}", topology.flavor)
    built = cloud.nova.wait_built(server)
    assert built["status"] == "ACTIVE", built.get("fault")
    node = built["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    assert node in topology.nodes
    assert built["OS-EXT-SRV-ATTR:host"] == topology.host
    assert topology.ironic.get(node)["instance_uuid"] == server
    assert cloud.placement.allocations(server) == {node: {topology.resource_class: 1}}
    assert cloud.nova.attempts(server) == 1

    cloud.nova.delete(server)
    cloud.nova.wait_gone(server)
    wait_for(lambda: node in cloud.candidates(topology), PERIODIC_WAIT,
             f"{name}: the freed node {node} offered again")
    assert cloud.placement.allocations(server) == {}
    # No provider duplicated, orphaned or deleted: each node has one provider, its
    # uuid and name the node's, and Placement holds the same providers as before.
    assert providers_of(cloud, topology.nodes) == {n: [n] for n in topology.nodes}
    assert all_providers(cloud) == before


@pytest.mark.every_release
@pytest.mark.parametrize("name", ["stock", "A", "B", "C"])
def test_every_provider_carries_the_traits_novas_scheduler_asks_for(cloud, name):
    topology = cloud.topologies[name]
    wait_for(lambda: all(NOVA_TRAITS <= cloud.placement.provider_trait_names(n)
                         for n in topology.nodes), PERIODIC_WAIT,
             f"{name}: {NOVA_TRAITS} on every provider")


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_a_disabled_compute_services_nodes_are_not_offered_and_our_writes_keep_novas_traits(
        cloud, name):
    topology = cloud.topologies[name]
    cloud.wait_all_offered(topology)
    cloud.nova.set_service_status(topology.host, enabled=False)
    try:
        disabled = NOVA_TRAITS | {"COMPUTE_STATUS_DISABLED"}
        wait_for(lambda: all(disabled <= cloud.placement.provider_trait_names(n)
                             for n in topology.nodes), PERIODIC_WAIT,
                 f"{name}: COMPUTE_STATUS_DISABLED on every provider")
        assert cloud.candidates(topology) == set()

        # Make whoever reports this topology write every provider: a node trait set in
        # Ironic reaches the provider (through the agents at once, through the driver at
        # nova's periodic), and that write keeps every trait nova put there.
        for node in topology.nodes:
            topology.ironic.set_traits(node, ["CUSTOM_RP_WRITE_PROBE"])
        wait_for(lambda: all("CUSTOM_RP_WRITE_PROBE" in cloud.placement.provider_trait_names(n)
                             for n in topology.nodes), PERIODIC_WAIT,
                 f"{name}: the node trait on every provider")
        for node in topology.nodes:
            assert disabled <= cloud.placement.provider_trait_names(node), node
        assert cloud.candidates(topology) == set()

        # nova's scheduler with its filters on agrees: nothing to land on.
        server = cloud.nova.boot(f"disabled-{name}", topology.flavor)
        built = cloud.nova.wait_built(server)
        assert built["status"] == "ERROR"
        assert "No valid host" in built["fault"]["message"], built["fault"]
        cloud.nova.delete(server)
    finally:
        cloud.nova.set_service_status(topology.host, enabled=True)
        for node in topology.nodes:
            topology.ironic.set_traits(node, [])
    cloud.wait_all_offered(topology)
