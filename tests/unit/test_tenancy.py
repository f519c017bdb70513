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

"""rp_reporter.tenancy: who may deploy on a node, and the marks that tell nova."""

import pytest

from rp_reporter import model
from rp_reporter import tenancy

P, OWNER, L = "p" * 32, "o" * 32, "l" * 32
AUTO = {"automatic_lessee": True}


def node(owner=None, lessee=None, internal=None):
    return model.node_from_api({"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "owner": owner,
                                "lessee": lessee, "driver_internal_info": internal})


def claim(record, **kw):
    return tenancy.claim(record.owner, record.lessee, record.automatic_lessee, **kw)


@pytest.mark.parametrize(("record", "projects"), [
    (node(), set()),
    (node(owner=P), {P}),
    (node(owner=OWNER, lessee=L), {L}),          # a lease hands the node over
    (node(lessee=L), {L}),
    (node(owner=OWNER, lessee=L, internal=AUTO), {OWNER}),  # Ironic's automatic lessee: no claim
    (node(lessee=L, internal=AUTO), set()),
    (node(owner="", lessee="  "), set()),
])
def test_lessee_else_owner(record, projects):
    found = claim(record)
    assert found.projects == frozenset(projects)
    assert found.public == (not projects)


def test_owner_or_lessee_is_ironics_own_rule():
    found = claim(node(owner=OWNER, lessee=L), rule=tenancy.OWNER_OR_LESSEE)
    assert found.projects == {OWNER, L}
    assert found.why == f"may deploy: owner {OWNER} and lessee {L}"


def test_a_public_owner_claims_nothing_and_the_line_says_why():
    found = claim(node(owner=OWNER), public_owners={OWNER})
    assert found.public
    assert found.why == f"public: nobody claims it; owner {OWNER} is public"
    leased = claim(node(owner=OWNER, lessee=L, internal=AUTO), public_owners={OWNER})
    assert leased.public and "set by Ironic at deploy" in leased.why


def test_an_unknown_rule_is_refused_by_name():
    with pytest.raises(ValueError, match="not one of lessee_else_owner, owner_or_lessee"):
        claim(node(), rule="owner")


def test_the_automatic_lessee_is_read_only_from_ironics_own_flag():
    assert node(internal=AUTO).automatic_lessee
    assert not node(internal={"automatic_lessee": "true"}).automatic_lessee
    assert not node(internal=None).automatic_lessee
    assert not node(internal=["automatic_lessee"]).automatic_lessee


def test_tenant_aggregates_are_known_by_name_and_metadata():
    ours = {"name": tenancy.aggregate_name(P), "metadata": {tenancy.TENANT_KEY: P}}
    assert tenancy.tenant_project(ours) == P
    assert tenancy.tenant_project({"name": "az1", "metadata": {}}) is None
    # the name of ours, someone else's metadata: not ours to manage
    assert tenancy.tenant_project({"name": tenancy.aggregate_name(P),
                                   "metadata": {tenancy.TENANT_KEY: OWNER}}) is None


def test_the_provider_keeps_other_writers_aggregates_and_exactly_its_deployers():
    tenants = {P: "agg-p", OWNER: "agg-o", L: "agg-l"}
    wanted = tenancy.wanted_aggregates({L}, tenants, kept={"az-1"})
    assert wanted == {"agg-l", "az-1"}
    now = {"agg-o", "someone-elses"}
    assert tenancy.provider_aggregates(now, wanted, set(tenants.values())) == {
        "agg-l", "az-1", "someone-elses"}


def test_a_deployer_without_a_tenant_aggregate_is_an_error_not_a_public_node():
    with pytest.raises(KeyError):
        tenancy.wanted_aggregates({P}, {})


def test_the_public_trait_is_derived_for_public_nodes_only():
    assert tenancy.derived_traits(claim(node())) == {tenancy.PUBLIC_TRAIT}
    assert tenancy.derived_traits(claim(node(owner=P))) == frozenset()
