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

"""A released node's provider leaves the cache nova's resource tracker writes through,
and nova's write-back never writes it again: nova's real compute manager (loading the
driver by its name) and report client, against the real Placement, on the installed
nova (31 to 33 write each node's update back from a copy of the whole cache; 34 only
the node's subtree)."""

import threading
import uuid

import nova.conf
import pytest
from nova import context as nova_context
from nova import objects
from nova import rpc
from nova.compute import manager as nova_manager
from nova.scheduler.client import report

from rp_reporter.nova_compute import coordinated_ring
from rp_reporter.nova_compute import provider_cache

CONF = nova.conf.CONF
RC = "CUSTOM_BAREMETAL_GOLD"


@pytest.fixture(scope="module")
def novas_config(tmp_path_factory, stack):
    """nova's configuration: this driver, and Placement for nova's report client."""
    path = tmp_path_factory.mktemp("nova") / "nova.conf"
    path.write_text(f"[DEFAULT]\nhost = compute-a\ncompute_driver = rp_reporter.IronicDriver\n"
                    f"transport_url = fake:/\n"
                    f"[placement]\nauth_type = admin_token\nendpoint = {stack.placement_url}\n"
                    f"token = admin\n[ironic]\nauth_type = none\n"
                    f"endpoint_override = {stack.ironic_url}\n")
    CONF(["--config-file", str(path)], project="nova")
    objects.register_all()
    rpc.init(CONF)  # the compute manager's RPC clients, on oslo.messaging's fake driver
    yield
    rpc.cleanup()
    CONF.reset()


def inventory(reserved):
    return {RC: {"total": 1, "reserved": reserved, "min_unit": 1, "max_unit": 1,
                 "step_size": 1, "allocation_ratio": 1.0}}


def novas_copy(client, context, node):
    """The copy nova's resource tracker of this release updates a node from."""
    subtree = getattr(client, "get_provider_subtree_and_ensure_root", None)
    return (subtree or client.get_provider_tree_and_ensure_root)(context, node, name=node)


@pytest.fixture
def two_nodes(novas_config):
    """nova's report client with two nodes' providers in its cache, each written."""
    client, context = report.SchedulerReportClient(), nova_context.get_admin_context()
    nodes = [str(uuid.uuid4()) for _ in range(2)]
    for node in nodes:
        client.get_provider_tree_and_ensure_root(context, node, name=node)
        client.set_inventory_for_provider(context, node, inventory(0))
    return client, context, nodes


def test_the_driver_drops_providers_from_the_cache_novas_resource_tracker_writes_through(
        novas_config):
    """nova's compute manager loads the driver by its name; the ring's releases go to
    the report client of the manager's resource tracker (not the process's singleton,
    whose cache nova's periodic never reads)."""
    manager = nova_manager.ComputeManager()
    assert type(manager.driver).__module__.startswith("rp_reporter.")
    client = coordinated_ring.novas_report_client(manager.driver)
    assert client is manager.rt.reportclient
    assert client is not report.report_client_singleton()


def test_a_release_during_novas_write_back_leaves_the_provider_to_its_new_owner(two_nodes):
    """Node B is released while nova updates node A: B leaves the cache, its new owner
    writes it, then nova writes A's update back.  B keeps its new owner's inventory and
    stays out of this service's cache (nova 31 to 33 wrote B again from the copy)."""
    client, context, (a, b) = two_nodes
    cache = provider_cache.ProviderCache(lambda: client)
    cache.guard()
    copy = novas_copy(client, context, a)
    cache.forget({b})  # the membership renewals release B
    new_owner = report.SchedulerReportClient()
    new_owner.get_provider_tree_and_ensure_root(context, b, name=b)
    new_owner.set_inventory_for_provider(context, b, inventory(1))
    client.update_from_provider_tree(context, copy)
    assert not client._provider_tree.exists(b)
    fresh = report.SchedulerReportClient()
    written = fresh.get_provider_tree_and_ensure_root(context, b, name=b)
    assert written.data(b).inventory[RC]["reserved"] == 1
    assert client._provider_tree.exists(a)


def test_a_release_while_novas_write_back_runs_waits_for_its_end_not_the_renewals(
        two_nodes, monkeypatch):
    """A release that comes while nova writes a node back returns at once (the renewals
    never wait for nova's writes); the provider leaves the cache when the write ends."""
    client, context, (a, b) = two_nodes
    cache = provider_cache.ProviderCache(lambda: client)
    cache.guard()
    during = {}
    novas_set_inventory = client.set_inventory_for_provider

    def set_inventory(context_, uuid_, inv_data):
        if "returned" not in during:
            renewal = threading.Thread(target=cache.forget, args=({b},))
            renewal.start()
            renewal.join(5)
            during["returned"] = not renewal.is_alive()
            during["cached"] = client._provider_tree.exists(b)
        return novas_set_inventory(context_, uuid_, inv_data)
    monkeypatch.setattr(client, "set_inventory_for_provider", set_inventory)
    client.update_from_provider_tree(context, novas_copy(client, context, a))
    if provider_cache.writes_back_whole_tree(client):
        assert during == {"returned": True, "cached": True}
    else:  # nova 34: no write-back to wait for; dropped at once
        assert during == {"returned": True, "cached": False}
    assert not client._provider_tree.exists(b)
