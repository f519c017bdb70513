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

import dataclasses

import pytest

from rp_reporter import model
from rp_reporter.sync import plan as planner

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
GOLD, SILVER = "CUSTOM_GOLD", "CUSTOM_SILVER"


def desired(rc=GOLD, reserved=0, traits=()):
    return model.Desired(NODE, NODE, rc, reserved, frozenset(traits))


def converged(d, usages=None, extra_traits=()):
    """What Placement holds after a clean sync of d (plus foreign traits)."""
    state = planner.apply(None, planner.plan(d, None))
    return planner.Observed(NODE, 7, state.inventories, state.traits | set(extra_traits), usages)


def test_missing_provider_is_created_traits_before_inventory():
    ops = planner.plan(desired(traits=["CUSTOM_A"]), None)
    assert [op.kind for op in ops] == ["create", "traits", "inventories"]
    assert ops[0] == planner.CreateProvider(NODE, NODE)
    assert ops[1].traits == {"CUSTOM_A", model.MANAGED_TRAIT}
    assert ops[2].inventories == {GOLD: model.inventory(0)}


def test_node_without_class_and_without_provider_plans_nothing():
    assert planner.plan(desired(rc=None), None) == ()


def test_converged_provider_plans_nothing():
    d = desired(reserved=1, traits=["CUSTOM_A"])
    assert planner.plan(d, converged(d)) == ()


def test_maintenance_toggle_is_one_inventory_write():
    ops = planner.plan(desired(reserved=1), converged(desired(reserved=0)))
    assert ops == (planner.SetInventories({GOLD: model.inventory(1)}),)


def test_traits_the_node_lacks_go_and_nova_owned_ones_stay():
    before = desired(traits=["CUSTOM_A", "CUSTOM_B"])
    observed = converged(before, extra_traits=["COMPUTE_STATUS_DISABLED", "OWNER_NOVA",
                                               "CUSTOM_OPERATOR", "HW_CPU_X86_AVX2"])
    (op,) = planner.plan(desired(traits=["CUSTOM_A"]), observed)
    assert op.traits == {"CUSTOM_A", model.MANAGED_TRAIT, "COMPUTE_STATUS_DISABLED",
                         "OWNER_NOVA"}


def test_a_trait_someone_else_set_goes_when_the_node_lacks_it():
    observed = converged(desired(), extra_traits=["CUSTOM_B"])
    (op,) = planner.plan(desired(), observed)
    assert op.traits == {model.MANAGED_TRAIT}


def test_twins_of_earlier_versions_go():
    old = frozenset({"CUSTOM_A", "CUSTOM_RPR_ADDED_CUSTOM_A", "CUSTOM_RPR_ADDED_CUSTOM_GONE",
                     "CUSTOM_GONE", model.MANAGED_TRAIT})
    observed = planner.Observed(NODE, 3, {GOLD: model.inventory(0)}, old, {})
    (op,) = planner.plan(desired(traits=["CUSTOM_A"]), observed)
    assert op.traits == {"CUSTOM_A", model.MANAGED_TRAIT}
    assert planner.plan(desired(traits=["CUSTOM_A"]), planner.apply(observed, (op,))) == ()


def test_a_node_trait_in_our_namespace_is_refused():
    d = model.provider(NODE, "gold", False, False, ["CUSTOM_RPR_ADDED_CUSTOM_X", "CUSTOM_X"])
    assert d.traits == {"CUSTOM_X"}
    assert d.refused_traits == {"CUSTOM_RPR_ADDED_CUSTOM_X"} and "CUSTOM_RPR_" in d.refusal
    observed = converged(desired(traits=["CUSTOM_X"]))
    assert planner.plan(d, observed) == ()  # it removes nothing of anyone's


def test_class_change_needs_usages():
    observed = converged(desired(rc=GOLD))
    assert planner.needs_usages(desired(rc=SILVER), observed)
    assert not planner.needs_usages(desired(rc=GOLD, reserved=1), observed)
    with pytest.raises(ValueError):
        planner.plan(desired(rc=SILVER), observed)


def test_class_change_with_allocation_keeps_old_class_reserved():
    observed = converged(desired(rc=GOLD), usages={GOLD: 1})
    (op,) = planner.plan(desired(rc=SILVER, reserved=1), observed)
    assert op.inventories == {SILVER: model.inventory(1), GOLD: model.inventory(1)}


def test_class_change_without_allocation_replaces_class():
    observed = converged(desired(rc=GOLD), usages={})
    (op,) = planner.plan(desired(rc=SILVER), observed)
    assert op.inventories == {SILVER: model.inventory(0)}


def test_old_class_dropped_once_allocation_is_gone():
    kept = {SILVER: model.inventory(0), GOLD: model.inventory(1)}
    observed = planner.Observed(NODE, 3, kept, desired(rc=SILVER).placement_traits, {})
    (op,) = planner.plan(desired(rc=SILVER), observed)
    assert op.inventories == {SILVER: model.inventory(0)}


def test_node_losing_its_class_empties_the_provider_unless_allocated():
    observed = converged(desired(rc=GOLD), usages={})
    (op,) = planner.plan(desired(rc=None), observed)
    assert op.inventories == {}
    observed = converged(desired(rc=GOLD), usages={GOLD: 1})
    (op,) = planner.plan(desired(rc=None), observed)
    assert op.inventories == {GOLD: model.inventory(1)}


def test_only_managed_inventory_fields_are_compared():
    d = desired()
    observed = converged(d)
    observed.inventories[GOLD]["extra_field_from_newer_placement"] = True
    assert planner.plan(d, observed) == ()


@pytest.mark.parametrize("before, after", [
    (desired(), desired(reserved=1, traits=["CUSTOM_X"])),
    (desired(traits=["CUSTOM_X", "CUSTOM_Y"]), desired(traits=["CUSTOM_Y"])),
    (desired(rc=GOLD), desired(rc=SILVER)),
])
def test_applying_the_plan_reaches_a_fixed_point(before, after):
    observed = converged(before, usages={})
    ops = planner.plan(after, observed)
    assert ops
    again = planner.apply(observed, ops).with_usages({})
    assert planner.plan(after, again) == ()
    assert again.inventories == after.inventories


# -- tenancy: the provider's aggregates ----------------------------------------------

PUBLIC = "CUSTOM_BAREMETAL_PUBLIC"
TENANTS = frozenset({"agg-p", "agg-q"})


def tenant_desired(aggregates, traits=()):
    return model.Desired(NODE, NODE, GOLD, 0, frozenset(traits), aggregates=frozenset(aggregates),
                         managed_aggregates=TENANTS)


def holding(aggregates, traits):
    d = tenant_desired(aggregates, traits)
    state = planner.apply(None, planner.plan(d, None))
    return planner.Observed(NODE, 7, state.inventories, state.traits, {}, frozenset(aggregates))


def test_a_new_claimed_node_joins_its_aggregate_before_it_is_offered():
    ops = planner.plan(tenant_desired({"agg-p"}), None)
    assert [op.kind for op in ops] == ["create", "traits", "aggregates", "inventories"]
    assert ops[2].aggregates == {"agg-p"}


def test_a_public_node_being_claimed_loses_the_trait_before_it_joins_the_aggregate():
    ops = planner.plan(tenant_desired({"agg-p"}), holding(set(), [PUBLIC]))
    assert [op.kind for op in ops] == ["traits", "aggregates"]
    assert PUBLIC not in ops[0].traits and ops[1].aggregates == {"agg-p"}


def test_a_claimed_node_turning_public_leaves_the_aggregate_before_it_gets_the_trait():
    ops = planner.plan(tenant_desired(set(), [PUBLIC]), holding({"agg-p", "az"}, []))
    assert [op.kind for op in ops] == ["aggregates", "traits"]
    assert ops[0].aggregates == {"az"} and PUBLIC in ops[1].traits


def test_a_node_changing_hands_is_in_nobodys_tenant_aggregate_in_between():
    ops = planner.plan(tenant_desired({"agg-q"}), holding({"agg-p", "az"}, []))
    assert [(op.kind, op.aggregates) for op in ops] == [
        ("aggregates", {"az"}), ("aggregates", {"az", "agg-q"})]


def test_aggregates_the_reporter_does_not_manage_stay():
    observed = holding({"agg-p", "someone-elses"}, [])
    assert planner.plan(tenant_desired({"agg-p"}), observed) == ()


def test_without_tenancy_the_aggregates_are_left_alone():
    observed = holding({"agg-p"}, [])
    assert planner.plan(desired(), dataclasses.replace(observed, aggregates=None)) == ()


def test_tenancy_on_a_provider_whose_aggregates_were_not_read_is_refused():
    observed = dataclasses.replace(holding(set(), []), aggregates=None)
    with pytest.raises(ValueError, match="needs aggregates"):
        planner.plan(tenant_desired({"agg-p"}), observed)
