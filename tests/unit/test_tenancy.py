"""rp_reporter.tenancy: who may deploy on a node, and the marks that tell nova."""

import pytest

from rp_reporter import tenancy

P, OWNER, L = "p" * 32, "o" * 32, "l" * 32
AUTO = {"automatic_lessee": True}


def node(owner=None, lessee=None, internal=None):
    return {"uuid": "n", "owner": owner, "lessee": lessee, "driver_internal_info": internal}


@pytest.mark.parametrize(("record", "projects"), [
    (node(), set()),
    (node(owner=P), {P}),
    (node(owner=OWNER, lessee=L), {L}),          # a lease hands the node over
    (node(lessee=L), {L}),
    (node(owner=OWNER, lessee=L, internal=AUTO), {OWNER}),  # Ironic's automatic lessee: no claim
    (node(lessee=L, internal=AUTO), set()),
    (node(owner="", lessee="  "), set()),
    (node(owner=7), set()),                   # not a project id: nobody's claim
])
def test_lessee_else_owner(record, projects):
    found = tenancy.claim(record)
    assert found.projects == frozenset(projects)
    assert found.public == (not projects)


def test_owner_or_lessee_is_ironics_own_rule():
    found = tenancy.claim(node(owner=OWNER, lessee=L), rule=tenancy.OWNER_OR_LESSEE)
    assert found.projects == {OWNER, L}
    assert found.why == f"may deploy: owner {OWNER} and lessee {L}"


def test_a_public_owner_claims_nothing_and_the_line_says_why():
    found = tenancy.claim(node(owner=OWNER), public_owners={OWNER})
    assert found.public
    assert found.why == f"public: nobody claims it; owner {OWNER} is public"
    leased = tenancy.claim(node(owner=OWNER, lessee=L, internal=AUTO), public_owners={OWNER})
    assert leased.public and "set by Ironic at deploy" in leased.why


def test_an_unknown_rule_is_refused_by_name():
    with pytest.raises(ValueError, match="not one of lessee_else_owner, owner_or_lessee"):
        tenancy.claim(node(), rule="owner")


def test_the_automatic_lessee_is_read_only_from_ironics_own_flag():
    assert tenancy.automatic_lessee(node(internal=AUTO))
    assert not tenancy.automatic_lessee(node(internal={"automatic_lessee": "true"}))
    assert not tenancy.automatic_lessee(node(internal=None))
    assert not tenancy.automatic_lessee({"uuid": "n"})


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


def test_the_public_trait_is_on_public_nodes_only():
    traits = {"CUSTOM_GPU"}
    public = tenancy.claim(node())
    owned = tenancy.claim(node(owner=P))
    assert tenancy.node_traits(traits, public) == {"CUSTOM_GPU", tenancy.PUBLIC_TRAIT}
    assert tenancy.node_traits({*traits, tenancy.PUBLIC_TRAIT}, owned) == {"CUSTOM_GPU"}
