"""Placement's provider listing is parsed as it arrives; an answer cut short is
retried like an outage, never taken for a shorter fleet."""

import json

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from keystoneauth1.adapter import Adapter

from rp_reporter.sync import placement as placement_sync
from tests.unit.http_server import serve

PROVIDERS = [{"uuid": f"0c6ad6f2-2b8c-4fd0-9d1e-6f7a0d0e1a{i:02d}", "generation": i,
              "links": [{"rel": "self", "href": "/resource_providers/x"}]} for i in range(40)]


def client(url):
    auth = token_endpoint.Token(url, "admin")
    return placement_sync.PlacementClient(
        Adapter(ks_session.Session(auth=auth), endpoint_override=url), backoff_max=0.1)


def listing(providers):
    return json.dumps({"resource_providers": providers}).encode()


def test_a_listing_is_read_whole_and_a_provider_named_by_its_uuid_shares_it():
    named = [{**rp, "name": rp["uuid"] if i % 2 else f"node-{i}"}
             for i, rp in enumerate(PROVIDERS)]
    body = listing(named)
    placement = client(serve([(body, len(body))])[0])
    listed = placement.list_providers()
    assert listed == {rp["uuid"]: (rp["name"], rp["generation"]) for rp in named}
    assert all((name is uuid) == (name == uuid) for uuid, (name, _) in listed.items())


def test_an_answer_cut_short_is_retried():
    named = [{**rp, "name": rp["uuid"]} for rp in PROVIDERS]
    body = listing(named)
    placement = client(serve([(body[:len(body) // 2], len(body)), (body, len(body))])[0])
    assert len(placement.list_providers()) == len(PROVIDERS)
    assert placement.requests["GET"] == 2
