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

"""TenantAggregates against an in-memory nova os-aggregates API (the real one: the
whole-nova suite)."""

import json
import uuid

import pytest

from rp_reporter import errors
from rp_reporter import tenancy
from rp_reporter.sync import tenant_aggregates

P, Q = "p" * 32, "q" * 32


class Answer:
    def __init__(self, status, body):
        self.status_code, self._body = status, body
        self.text = json.dumps(body)

    def json(self):
        return self._body


class Nova:
    """nova's aggregate API as far as TenantAggregates uses it; ``fail_metadata``
    drops the connection on the next set_metadata (a crash between the two calls)."""

    def __init__(self, status=None):
        self.aggregates, self.calls, self.status = [], [], status
        self.fail_metadata = False

    def add(self, name, metadata=None):
        aggregate = {"id": len(self.aggregates) + 1, "name": name, "uuid": str(uuid.uuid4()),
                     "metadata": dict(metadata or {}), "hosts": []}
        self.aggregates.append(aggregate)
        return aggregate

    def request(self, url, method, json=None, raise_exc=False, headers=None):
        assert headers["OpenStack-API-Version"] == "compute 2.41"
        self.calls.append((method, url))
        if self.status:
            return Answer(self.status, {"forbidden": {"message": "Policy doesn't allow"}})
        if method == "GET":
            return Answer(200, {"aggregates": self.aggregates})
        if url == "/os-aggregates":
            name = json["aggregate"]["name"]
            if any(a["name"] == name for a in self.aggregates):
                return Answer(409, {"conflictingRequest": {"message": "exists"}})
            return Answer(200, {"aggregate": self.add(name)})
        if self.fail_metadata:
            self.fail_metadata = False
            raise tenant_aggregates.ksa_exc.ConnectionError("reset")
        (aggregate,) = [a for a in self.aggregates if f"/{a['id']}/" in url]
        aggregate["metadata"].update(json["set_metadata"]["metadata"])
        return Answer(200, {"aggregate": aggregate})


def test_missing_aggregates_are_made_once_and_known_ones_cost_no_call():
    nova = Nova()
    made = tenant_aggregates.TenantAggregates(nova).ensure([P, Q])
    assert {a["name"]: a["metadata"] for a in nova.aggregates} == {
        tenancy.aggregate_name(P): {tenancy.TENANT_KEY: P},
        tenancy.aggregate_name(Q): {tenancy.TENANT_KEY: Q}}
    assert made == {a["metadata"][tenancy.TENANT_KEY]: a["uuid"] for a in nova.aggregates}
    calls = len(nova.calls)
    again = tenant_aggregates.TenantAggregates(nova)
    again.refresh()
    assert again.ensure([P]) == {P: made[P]} and len(nova.calls) == calls + 1  # the refresh


def test_a_crash_between_the_two_calls_is_finished_by_the_next_ensure():
    nova = Nova()
    nova.fail_metadata = True
    aggregates = tenant_aggregates.TenantAggregates(nova)
    with pytest.raises(errors.ServiceError) as raised:
        aggregates.ensure([P])
    assert raised.value.kind == errors.UNAVAILABLE
    assert tenancy.tenant_project(nova.aggregates[0]) is None  # not usable yet
    assert aggregates.ensure([P]) == {P: nova.aggregates[0]["uuid"]}  # 409, then finished
    assert nova.aggregates[0]["metadata"] == {tenancy.TENANT_KEY: P}
    assert len(nova.aggregates) == 1


def test_another_agents_aggregate_is_taken_not_doubled():
    nova = Nova()
    theirs = nova.add(tenancy.aggregate_name(P), {tenancy.TENANT_KEY: P})
    mine = tenant_aggregates.TenantAggregates(nova)
    assert mine.ensure([P]) == {P: theirs["uuid"]} and len(nova.aggregates) == 1


def test_an_aggregate_of_our_name_meaning_another_project_is_refused_not_changed():
    nova = Nova()
    nova.add(tenancy.aggregate_name(P), {tenancy.TENANT_KEY: Q})
    with pytest.raises(errors.ServiceError, match=f"has filter_tenant_id={Q}, not {P}"):
        tenant_aggregates.TenantAggregates(nova).ensure([P])
    assert nova.aggregates[0]["metadata"] == {tenancy.TENANT_KEY: Q}


def test_a_user_without_nova_admin_gets_one_line_naming_the_grant():
    with pytest.raises(errors.ServiceError) as raised:
        tenant_aggregates.TenantAggregates(Nova(status=403)).refresh()
    assert raised.value.kind == errors.DENIED
    assert str(raised.value).startswith("[nova] nova GET /os-aggregates: 403")
    assert "admin role" in str(raised.value) and "\n" not in str(raised.value)


def test_every_known_uuid_is_one_object_until_the_set_changes():
    aggregates = tenant_aggregates.TenantAggregates(Nova())
    aggregates.ensure([P])
    first = aggregates.uuids()
    assert first is aggregates.uuids() and len(first) == 1
    aggregates.ensure([P, Q])
    assert aggregates.uuids() == set(aggregates.known().values()) and len(aggregates.uuids()) == 2
