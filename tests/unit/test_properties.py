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

"""Property tests: the model and the planner hold for any input."""

import uuid

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from rp_reporter import model
from rp_reporter.sync import plan as planner

settings.register_profile("rp", max_examples=300, deadline=None)
settings.load_profile("rp")

anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=5)
trait_names = st.from_regex(r"\A(CUSTOM_[A-Z0-9_]{1,30}|HW_CPU_X86_[A-Z0-9]{1,8})\Z")
node_fields = {
    "uuid": st.uuids().map(str) | anything,
    "name": st.none() | st.text(max_size=300) | anything,
    "resource_class": st.none() | st.text(max_size=300) | anything,
    "provision_state": st.sampled_from(["available", "active", "manageable", "enroll", None])
    | anything,
    "power_state": st.sampled_from(["power on", "power off", "error", None]) | anything,
    "maintenance": st.booleans() | anything,
    "instance_uuid": st.none() | st.uuids().map(str) | anything,
    "traits": st.lists(trait_names, max_size=5) | anything,
}
records = st.fixed_dictionaries({}, optional=node_fields) | anything


@given(records)
def test_any_record_gives_a_valid_provider_or_a_clean_refusal(record):
    try:
        node = model.node_from_api(record)
    except model.InvalidNode as e:
        assert str(e)  # a reason, in words
        return
    d = model.desired(node)
    uuid.UUID(d.uuid)
    assert d.name == d.uuid and d.reserved in (0, 1)
    if d.resource_class is None:
        assert d.problem and d.inventories == {}
    else:
        assert model.valid_name(d.resource_class) and d.resource_class.startswith("CUSTOM_")
        assert d.inventories[d.resource_class]["total"] == 1
    assert all(model.valid_name(t) for t in d.placement_traits)
    assert model.MANAGED_TRAIT in d.placement_traits
    assert not any(t.startswith(model.OWN_PREFIX) for t in d.traits)  # never from a node
    assert d.traits | d.refused_traits == node.traits


classes = st.sampled_from(["CUSTOM_GOLD", "CUSTOM_SILVER", "CUSTOM_BRONZE"])
desired_providers = st.builds(
    lambda rc, reserved, traits: model.Desired(
        "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
        rc, reserved, frozenset(traits)),
    st.none() | classes, st.integers(0, 1), st.sets(trait_names, max_size=4))
inventories = st.dictionaries(classes, st.integers(0, 1).map(model.inventory), max_size=2)
# What a provider may carry: anyone's traits, nova's, the marker, twins of earlier versions.
provider_trait_names = (trait_names | st.sampled_from(
    ["COMPUTE_NODE", "COMPUTE_STATUS_DISABLED", "OWNER_NOVA", model.MANAGED_TRAIT])
    | trait_names.map(lambda t: model.LEGACY_ADDED_PREFIX + t))
observed_providers = st.builds(
    lambda inv, traits, used: planner.Observed(
        "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", 3, inv, frozenset(traits),
        {rc: 1 for rc in inv if rc in used}),
    inventories, st.sets(provider_trait_names, max_size=5), st.sets(classes))


@given(desired_providers, st.none() | observed_providers)
def test_applying_the_plan_gives_desired_and_planning_again_gives_nothing(d, observed):
    ops = planner.plan(d, observed)
    after = planner.apply(observed, ops)
    if observed is None and d.resource_class is None:
        assert ops == () and after is None
        return
    after = after.with_usages(observed.usages if observed else {})
    assert planner.plan(d, after) == ()
    assert d.placement_traits <= after.traits
    if d.resource_class:
        assert after.inventories[d.resource_class] == d.inventories[d.resource_class]
    for rc in after.inventories:  # any other class is there only because it is allocated
        assert rc == d.resource_class or (observed and observed.usages.get(rc))


@given(desired_providers, observed_providers)
def test_after_a_plan_the_provider_carries_the_node_traits_marker_and_nova_owned_only(d,
                                                                                   observed):
    nova_owned = {t for t in observed.traits if t.startswith(model.NOVA_OWNED_PREFIXES)}
    after = planner.apply(observed, planner.plan(d, observed))
    assert after.traits == d.traits | {model.MANAGED_TRAIT} | nova_owned
    assert not any(t.startswith(model.LEGACY_ADDED_PREFIX) for t in after.traits)
