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

"""The Placement and Ironic client wrappers, replayed from betamax cassettes.

The cassettes were recorded from the real services by

    RP_RECORD_CASSETTES=1 tox -e record

which starts the local stack (tools/localstack/), runs these same tests
against it and rewrites tests/unit/sync/cassettes/.
"""

import contextlib
import os

import betamax
import pytest
import requests
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from keystoneauth1.adapter import Adapter

from rp_reporter import model
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import placement as placement_sync

CASSETTES = os.path.join(os.path.dirname(__file__), "cassettes")
RECORD = os.environ.get("RP_RECORD_CASSETTES") == "1"
RP = "5d1c3c3e-7f56-4f0e-9c55-2d6b1f1d2a01"
NODES = [f"0c6ad6f2-2b8c-4fd0-9d1e-6f7a0d0e1a0{i}" for i in range(3)]


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    if not RECORD:
        yield {"placement": "http://placement.test", "ironic": "http://ironic.test"}
        return
    from tools import clients
    from tools import localstack
    stack = localstack.LocalStack(str(tmp_path_factory.mktemp("stack")))
    stack.start(["rabbitmq", "placement", "ironic"])
    ironic = clients.Ironic(stack.ironic_url, "cassette")
    for uuid in NODES:
        ironic._call("POST", "/v1/nodes", json={"uuid": uuid, "driver": "fake-hardware",
                                                "resource_class": "gold", "shard": "cassette"})
    try:
        yield {"placement": stack.placement_url, "ironic": stack.ironic_url}
    finally:
        stack.stop()


def recorded_adapter(name, endpoint, service_type):
    http = requests.Session()
    recorder = betamax.Betamax(http, cassette_library_dir=CASSETTES)
    if RECORD:  # 'once' on an empty cassette keeps repeated requests, in order
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(CASSETTES, name + ".json"))
    recorder.use_cassette(name, record="once" if RECORD else "none",
                          match_requests_on=["method", "path", "query", "body"])
    recorder.start()
    auth = token_endpoint.Token(endpoint, "admin")
    return recorder, Adapter(ks_session.Session(auth=auth, session=http),
                             service_type=service_type, endpoint_override=endpoint)


@pytest.fixture
def placement(endpoints, request):
    recorder, adapter = recorded_adapter(request.node.name, endpoints["placement"], "placement")
    yield placement_sync.PlacementClient(adapter, attempts=1)
    recorder.stop()


@pytest.fixture
def ironic(endpoints, request):
    recorder, adapter = recorded_adapter(request.node.name, endpoints["ironic"], "baremetal")
    yield ironic_sync.IronicClient.from_adapter(adapter, shard="cassette", page_size=2)
    recorder.stop()


def test_placement_client_lifecycle(placement):
    assert placement.list_providers() == {}  # marker trait not created yet: nothing managed
    generation = placement.create_provider(RP, RP)
    assert generation == 0
    generation = placement.set_traits(RP, generation, {model.MANAGED_TRAIT, "CUSTOM_GPU"})
    generation = placement.set_inventories(RP, generation, {"CUSTOM_GOLD": model.inventory(1)})
    assert generation == 2
    observed = placement.observe(RP)
    assert observed.generation == 2
    assert observed.traits == {model.MANAGED_TRAIT, "CUSTOM_GPU"}
    assert observed.inventories["CUSTOM_GOLD"]["reserved"] == 1
    assert placement.list_providers() == {RP: (RP, 2)}

    with pytest.raises(placement_sync.Conflict) as conflict:
        placement.set_inventories(RP, 1, {"CUSTOM_GOLD": model.inventory(0)})
    assert conflict.value.code == placement_sync.CONCURRENT_UPDATE

    assert not any(placement.usages(RP).values()) and not placement.has_allocations(RP)
    assert placement.delete_provider(RP) is True
    assert placement.delete_provider(RP) is False
    assert placement.observe(RP) is None
    # Class and traits were created once each; every request was counted.
    assert placement.requests["PUT"] == 2 + 2 + 1 + 1  # CUSTOM_ names, traits, inv x2
    assert placement.requests["POST"] == 1 and placement.requests["DELETE"] == 2


def test_placement_client_refuses_invalid_names_before_any_request(placement):
    for bad in ("CUSTOM_A/../B", "custom_lower", "CUSTOM_" + "X" * 300):
        with pytest.raises(ValueError, match="invalid name"):
            placement.ensure_traits([bad])
    assert sum(placement.requests.values()) == 0


def test_ironic_listing_follows_pages_and_reads_only_needed_fields(ironic):
    records = ironic.list_nodes()
    assert sorted(r["uuid"] for r in records) == NODES
    assert set(records[0]) == set(ironic_sync.NODE_FIELDS)
    assert records[0]["resource_class"] == "gold" and records[0]["shard"] == "cassette"
    assert ironic.get_node(NODES[0])["uuid"] == NODES[0]
    assert ironic.get_node("0c6ad6f2-2b8c-4fd0-9d1e-6f7a0d0e1aff") is None
