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

"""The production-shaped stack itself, and the reporter on it with the good credentials:
the catalog, what each test identity may do (measured against the real services), and
tests/functional's reconcile tests for every kind of node (in-process) and a second
run from a new process.  Wrong credentials: test_safety.py."""


import pytest
from keystoneauth1 import adapter
from keystoneauth1 import loading
from keystoneauth1 import session as ks_session

from tests.functional.test_reconcile import test_each_kind_of_node_ends_exactly_right  # noqa: F401
from tests.functional.test_reconcile import test_second_pass_from_a_new_process_writes_nothing  # noqa: F401,E501
from tools import localstack

pytestmark = pytest.mark.functional

# What each identity may do, as measured on this stack (release policy defaults;
# Ironic's rbac_service_role_elevated_access left False).  Ironic: does a listing of
# the shard show a node the system admin created, GET of that node, PATCH of its
# resource_class; Placement: GET /resource_providers, POST /reshaper.
MEASURED = {
    "rp-system-reader": {"lists": True, "get": 200, "patch": 403, "rp_list": 403, "reshape": 403},
    "rp-system-member": {"lists": True, "get": 200, "patch": 200, "rp_list": 403, "reshape": 403},
    "rp-service": {"lists": False, "get": 404, "patch": 404, "rp_list": 200, "reshape": 204},
    "rp-admin": {"lists": False, "get": 404, "patch": 404, "rp_list": 200, "reshape": 403},
    "rp-reader": {"lists": False, "get": 404, "patch": 404, "rp_list": 403, "reshape": 403},
}


def as_identity(stack, name, service_type):
    """A keystoneauth adapter built from stack.credentials(name), as the reporter builds
    its own: password auth, the endpoint found in the catalog (no override)."""
    creds = stack.credentials(name)
    loader = loading.get_plugin_loader(creds["auth_type"])
    names = {opt.dest for opt in loader.get_options()}
    auth = loader.load_from_options(**{k: v for k, v in creds.items() if k in names})
    return adapter.Adapter(ks_session.Session(auth=auth), service_type=service_type,
                           interface=creds["valid_interfaces"].split(","),
                           region_name=creds["region_name"], raise_exc=False)


def test_catalog_has_placement_and_baremetal_in_region_one(stack):
    # As the reporter's two users see it in their tokens (system and project scope).
    for name in ("rp-system-reader", "rp-service"):
        session = as_identity(stack, name, "placement").session
        catalog = session.auth.get_access(session).service_catalog
        for service_type, url in (("placement", stack.placement_url),
                                  ("baremetal", stack.ironic_url)):
            for interface in ("public", "internal"):
                assert catalog.url_for(service_type=service_type, interface=interface,
                                       region_name=localstack.REGION) == url, (name, interface)


def test_identities_behave_as_measured(stack, ironic, placement):
    node = ironic.create()
    rp = placement._call("POST", "/resource_providers", json={"name": f"probe-{node}"})["uuid"]
    placement._call("PUT", "/resource_classes/CUSTOM_RPR_PROBE")
    seen = {}
    for name in localstack.IDENTITIES:
        bm, pl = as_identity(stack, name, "baremetal"), as_identity(stack, name, "placement")
        bm_headers = {"X-OpenStack-Ironic-API-Version": "1.95"}
        listing = bm.get(f"/v1/nodes?shard={ironic.shard}", headers=bm_headers)
        assert listing.status_code == 200, (name, listing.text)
        generation = placement._call("GET", f"/resource_providers/{rp}")["generation"]
        reshape = pl.post("/reshaper", headers={"OpenStack-API-Version": "placement 1.30"},
                          json={"allocations": {}, "inventories": {rp: {
                              "resource_provider_generation": generation,
                              "inventories": {"CUSTOM_RPR_PROBE": {"total": 1}}}}})
        seen[name] = {
            "lists": node in {n["uuid"] for n in listing.json()["nodes"]},
            "get": bm.get(f"/v1/nodes/{node}", headers=bm_headers).status_code,
            "patch": bm.patch(f"/v1/nodes/{node}", headers=bm_headers, json=[
                {"op": "replace", "path": "/resource_class", "value": "baremetal-gold"}]
            ).status_code,
            "rp_list": pl.get("/resource_providers").status_code,
            "reshape": reshape.status_code,
        }
    assert seen == MEASURED
