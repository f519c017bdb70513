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

"""The move doc/source/admin/moving.md describes, with nova's own code on one side: nova's
IronicDriver and SchedulerReportClient write the providers, `rp-reporter reconcile`
adopts them, and nova takes them back.  At no step is a provider deleted, an inventory
dropped or changed (a scheduling gap), or an allocation lost, and the adoption costs one
write per provider (the managed marker; a refused creation finds each), not a write
storm."""

import json
import subprocess
import sys

import nova.conf
import pytest
from keystoneauth1 import adapter as ksa_adapter
from keystoneauth1 import session as ksa_session
from keystoneauth1 import token_endpoint
from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report
from nova.virt.ironic import driver as nova_driver

from rp_reporter import model
from tests.nova.in_process.test_driver import AlwaysUp

CONF = nova.conf.CONF
HOST = "compute-a"
GOLD = "CUSTOM_BAREMETAL_GOLD"


@pytest.fixture
def nova_service(stack, ironic, monkeypatch, tmp_path):
    """nova-compute's reporting for this test's shard, one service owning it all."""
    path = tmp_path / "nova.conf"
    path.write_text(f"[DEFAULT]\nhost = {HOST}\n[ironic]\nauth_type = none\n"
                    f"endpoint_override = {stack.ironic_url}\nshard = {ironic.shard}\n")
    CONF(["--config-file", str(path)], project="nova")
    objects.register_all()
    instances = set()
    monkeypatch.setattr(objects.InstanceList, "get_uuids_by_host",
                        lambda ctxt, host: sorted(instances))
    monkeypatch.setattr(objects.ServiceList, "get_all_computes_by_hv_type",
                        lambda ctxt, hv: [objects.Service(host=HOST)])
    session = ksa_session.Session(auth=token_endpoint.Token(stack.placement_url, "admin"))

    def report_all():
        """One periodic pass of nova-compute's resource tracker, per node, with a fresh
        provider cache (as after nova's cache refresh: others wrote in between)."""
        client = report.SchedulerReportClient(adapter=ksa_adapter.Adapter(
            session, service_type="placement", endpoint_override=stack.placement_url,
            raise_exc=False))
        driver = nova_driver.IronicDriver(virtapi=None)
        driver.servicegroup_api = AlwaysUp()
        ctx = nova_context.get_admin_context()
        for node in driver.get_available_nodes():
            tree = client.get_provider_tree_and_ensure_root(ctx, node, name=node)
            driver.update_provider_tree(tree, node)
            client.update_from_provider_tree(ctx, tree)
    yield report_all, instances
    CONF.reset()


def reconcile(stack, shard, tmp_path):
    conf = tmp_path / "rp_reporter.conf"
    conf.write_text(stack.reporter_conf(ironic={"shard": shard}))
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file", str(conf),
                           "reconcile", "-f", "json"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    (summary,) = json.loads(proc.stdout)
    return summary


def test_from_nova_to_rp_reporter_and_back(stack, ironic, placement, nova_service, tmp_path):
    report_all, instances = nova_service
    free = ironic.create_many(6, traits=["CUSTOM_GPU"])
    busy = ironic.create()
    nodes = [*free, busy]
    report_all()  # nova's providers
    consumer = placement.allocate(busy, GOLD)  # nova schedules an instance to one node
    ironic.patch(busy, instance_uuid=consumer)
    instances.add(consumer)
    report_all()  # and reserves it, as nova does for a node in use
    by_nova = {n: placement.provider(n) for n in nodes}
    assert all(p["inventories"] for p in by_nova.values())
    assert by_nova[busy]["inventories"] == {GOLD: (1, 1, 1)}

    adopted = reconcile(stack, ironic.shard, tmp_path)
    assert (adopted["created"], adopted["deleted"], adopted["updated"]) == (0, 0, len(nodes))
    requests = adopted["placement_requests"]
    # nova's providers carry no marker, so the listing does not show them: each costs a
    # creation Placement refuses (409: it exists), a read, and one write, the marker.
    assert "DELETE" not in requests and requests.get("POST", 0) <= len(nodes)
    assert requests["PUT"] <= len(nodes) + 1  # the marker on each (+ its name, once)
    for node in nodes:
        provider = placement.provider(node)
        assert provider["inventories"] == by_nova[node]["inventories"], node  # no gap
        assert provider["traits"] == by_nova[node]["traits"] | {model.MANAGED_TRAIT}, node
    assert placement.allocations(consumer) == {busy: {GOLD: 1}}
    assert reconcile(stack, ironic.shard, tmp_path)["updated"] == 0  # and then quiet

    report_all()  # back to nova: it replaces the traits, keeps everything else
    for node in nodes:
        provider = placement.provider(node)
        assert provider["inventories"] == by_nova[node]["inventories"], node
        assert provider["traits"] == by_nova[node]["traits"], node
    assert placement.allocations(consumer) == {busy: {GOLD: 1}}
    placement.deallocate(consumer)

