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

"""Placement's provider listing is parsed as it arrives; an answer cut short is
retried like an outage, never taken for a shorter fleet.  Ironic's pages are asked for
ahead of the reader."""

import json
import threading

from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
from keystoneauth1.adapter import Adapter

from rp_reporter.sync import ironic as ironic_sync
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


class _Node:
    def __init__(self, uuid):
        self.uuid = uuid
        self._info = {"uuid": uuid}


class _PagedIronic:
    """python-ironicclient's node.list over NODES, a page per call, calls recorded."""

    def __init__(self, uuids):
        self.uuids = uuids
        self.markers = []
        self.asked = threading.Condition()
        self.node = self

    def list(self, fields, limit, marker, **scope):
        with self.asked:
            self.markers.append(marker)
            self.asked.notify_all()
        start = 0 if marker is None else self.uuids.index(marker) + 1
        return [_Node(u) for u in self.uuids[start:start + limit]]


def test_ironics_next_page_is_asked_for_while_the_caller_reads_this_one():
    """Asked one after the other, Ironic's one API worker waited for the reader's work on
    every page (a 10^5-node pass kept it about 70% busy, a bare listing 90%)."""
    uuids = [f"node-{i:03d}" for i in range(25)]
    fake = _PagedIronic(uuids)
    ironic = ironic_sync.IronicClient(client=fake, page_size=10)
    ironic.api_version = ironic_sync.MIN_API_VERSION
    records = ironic.iter_nodes()
    assert next(records)["uuid"] == "node-000"
    with fake.asked:  # the second page, asked for with page one's last node as marker
        assert fake.asked.wait_for(lambda: len(fake.markers) == 2, timeout=5)
    assert fake.markers == [None, "node-009"]
    assert [r["uuid"] for r in records] == uuids[1:]
    assert fake.markers == [None, "node-009", "node-019"]  # and no page past the last
    assert ironic.listing_gap is None
