"""rp_reporter.nova_compute.IronicDriver with nova's real IronicDriver base and real
ProviderTree, talking to the real Ironic through nova's own (openstacksdk) connection.

Three compute hosts are simulated in one process by switching nova's CONF.host
and by giving each host its own instance list (what nova's database would say).
"""

import uuid

import nova.conf
import pytest
from nova import objects
from nova.compute import provider_tree as nova_provider_tree

from rp_reporter import model
from rp_reporter import nova_compute

CONF = nova.conf.CONF
HOSTS = ("compute-a", "compute-b", "compute-c")


@pytest.fixture(scope="module")
def nova_config(stack, tmp_path_factory):
    path = tmp_path_factory.mktemp("nova") / "nova.conf"
    rp_path = path.parent / "rp_reporter.conf"
    rp_path.write_text(f"[ring]\npeer_list = {','.join(HOSTS)}\n")
    path.write_text(
        "[DEFAULT]\nhost = compute-a\n"
        f"[ironic]\nauth_type = none\nendpoint_override = {stack.ironic_url}\n"
        f"[rp_reporter]\npeers_from = coordination\nconfig_file = {rp_path}\n")
    CONF(["--config-file", str(path)], project="nova")
    objects.register_all()
    yield
    CONF.reset()


@pytest.fixture
def hosts(nova_config, ironic, monkeypatch):
    """A driver per simulated host, scoped to this test's shard."""
    CONF.set_override("shard", ironic.shard, group="ironic")
    instances = {h: set() for h in HOSTS}

    def uuids_by_host(ctxt, host):
        return sorted(instances[host])

    monkeypatch.setattr(objects.InstanceList, "get_uuids_by_host", uuids_by_host)
    drivers = {h: nova_compute.IronicDriver(virtapi=None) for h in HOSTS}
    yield drivers, instances
    CONF.clear_override("shard", group="ironic")
    CONF.clear_override("host")


def available_nodes(drivers, host):
    CONF.set_override("host", host)
    return set(drivers[host].get_available_nodes())


def test_three_hosts_split_the_nodes_by_the_rules(hosts, ironic):
    drivers, instances = hosts
    free = ironic.create_many(24, state="enroll")
    busy = {h: ironic.create(state="enroll") for h in HOSTS}
    for h, node in busy.items():  # each host manages an instance on one node
        instance = str(uuid.uuid4())
        ironic.patch(node, instance_uuid=instance)
        instances[h].add(instance)
    orphan = ironic.create(state="enroll")
    ironic.patch(orphan, instance_uuid=str(uuid.uuid4()))  # managed by a host not running

    owned = {h: available_nodes(drivers, h) for h in HOSTS}
    ring = drivers["compute-a"].rp_ring
    assert ring.members == set(HOSTS)
    for h in HOSTS:
        assert busy[h] in owned[h]  # rule 1: its own instances
        assert {n for n in free if ring.owner(n) == h} <= owned[h]  # rule 2: the ring
        for other in set(HOSTS) - {h}:
            assert busy[other] not in owned[h]  # rule 3: never another's instance
    assert all(owned[h].isdisjoint(owned[o]) for h in HOSTS for o in HOSTS if h != o)
    assert set().union(*owned.values()) == set(free) | set(busy.values())
    assert all(owned[h] - set(busy.values()) for h in HOSTS)  # everyone got a share
    assert not any(orphan in nodes for nodes in owned.values())


def test_update_provider_tree_matches_the_agents_model(hosts, ironic):
    drivers, instances = hosts
    kinds = [ironic.create(), ironic.create(maintenance=True), ironic.create(state="manageable"),
             ironic.create(traits=["CUSTOM_GPU", "HW_CPU_X86_AVX2"]),
             ironic.create(resource_class="Bare Metal.gold--XL"),
             ironic.create(state="active")]
    instances["compute-b"].add(ironic.get(kinds[-1])["instance_uuid"])  # b deployed it
    by_host = {h: available_nodes(drivers, h) for h in HOSTS}
    for node in kinds:
        host = next(h for h, nodes in by_host.items() if node in nodes)
        CONF.set_override("host", host)
        tree = nova_provider_tree.ProviderTree()
        tree.new_root(node, node)
        drivers[host].update_provider_tree(tree, node)
        data = tree.data(node)
        desired = model.desired(model.node_from_api(ironic.get(node)))
        assert dict(data.inventory) == desired.inventories, node
        assert set(data.traits) == desired.placement_traits, node


def test_only_traits_it_added_are_removed_and_a_class_change_keeps_the_old_class(hosts,
                                                                                ironic):
    drivers, instances = hosts
    node = ironic.create(traits=["CUSTOM_A", "CUSTOM_B"], state="available")
    host = next(h for h in HOSTS if node in available_nodes(drivers, h))
    CONF.set_override("host", host)
    tree = nova_provider_tree.ProviderTree()
    tree.new_root(node, node)
    drivers[host].update_provider_tree(tree, node)
    tree.add_traits(node, "COMPUTE_NODE_SOMETHING_NOVA_SET", "CUSTOM_OPERATOR")
    ironic.set_traits(node, ["CUSTOM_A"])
    instance = str(uuid.uuid4())
    ironic.patch(node, instance_uuid=instance, resource_class="baremetal-silver")
    instances[host].add(instance)
    assert node in available_nodes(drivers, host)
    drivers[host].update_provider_tree(tree, node)
    data = tree.data(node)
    assert "CUSTOM_B" not in data.traits and "CUSTOM_A" in data.traits
    assert {"COMPUTE_NODE_SOMETHING_NOVA_SET", "CUSTOM_OPERATOR"} <= set(data.traits)
    assert set(data.inventory) == {"CUSTOM_BAREMETAL_GOLD", "CUSTOM_BAREMETAL_SILVER"}
    assert data.inventory["CUSTOM_BAREMETAL_GOLD"]["reserved"] == 1
