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

import uuid

import pytest

from rp_reporter import model

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
AVAILABLE = {"uuid": NODE, "resource_class": "baremetal-gold", "provision_state": "available",
             "power_state": "power off", "maintenance": False, "instance_uuid": None,
             "traits": []}


def desired(**fields):
    return model.desired(model.node_from_api({**AVAILABLE, **fields}))


def test_available_node_offers_one_unused_unit():
    d = desired()
    assert d.uuid == NODE and d.name == NODE  # invariant 1: uuid and name = node uuid
    assert d.inventories == {"CUSTOM_BAREMETAL_GOLD": {
        "total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1,
        "allocation_ratio": 1.0}}
    assert d.problem is None


@pytest.mark.parametrize("fields", [
    {"maintenance": True},
    {"power_state": None},
    {"power_state": "error"},
    {"provision_state": "manageable"},
    {"provision_state": "enroll"},
    {"provision_state": "cleaning"},
    {"provision_state": "active", "instance_uuid": str(uuid.uuid4())},
    {"instance_uuid": str(uuid.uuid4())},  # claimed, not yet deployed
])
def test_unusable_or_used_node_is_reserved(fields):
    assert desired(**fields).inventories["CUSTOM_BAREMETAL_GOLD"]["reserved"] == 1


@pytest.mark.parametrize("power_state", ["power on", "power off"])
def test_good_power_states_are_not_reserved(power_state):
    assert desired(power_state=power_state).reserved == 0


@pytest.mark.parametrize("raw, placement", [
    ("baremetal-gold", "CUSTOM_BAREMETAL_GOLD"),
    ("baremetal.gold", "CUSTOM_BAREMETAL_GOLD"),
    ("Baremetal  Gold--x", "CUSTOM_BAREMETAL_GOLD_X"),
    ("gold", "CUSTOM_GOLD"),
    ("CUSTOM_GOLD", "CUSTOM_CUSTOM_GOLD"),  # nova does not detect the prefix either
    ("bm-gpu/a100", "CUSTOM_BM_GPU_A100"),
    ("-gold-", "CUSTOM__GOLD_"),
    ("große", "CUSTOM_GRO_E"),
])
def test_resource_class_normalized_exactly_as_nova(raw, placement):
    assert desired(resource_class=raw).resource_class == placement


@pytest.mark.parametrize("raw, reason", [
    (None, "no resource_class"),
    ("", "no resource_class"),
    ("---", "normalizes to nothing"),
    ("ü", "normalizes to nothing"),
    ("x" * 250, "over 255"),
    (42, "not a string"),
])
def test_unusable_resource_class_gives_no_inventory_and_a_reason(raw, reason):
    d = desired(resource_class=raw)
    assert d.resource_class is None and d.inventories == {}
    assert reason in d.problem


def test_traits_are_the_nodes_and_the_marker():
    d = desired(traits=["CUSTOM_GPU", "HW_CPU_X86_AVX2"])
    assert d.traits == {"CUSTOM_GPU", "HW_CPU_X86_AVX2"} and d.refusal is None
    assert d.placement_traits == {"CUSTOM_GPU", "HW_CPU_X86_AVX2", model.MANAGED_TRAIT}


def test_node_traits_in_our_namespace_are_refused_and_named():
    d = desired(traits=["CUSTOM_GPU", "CUSTOM_RPR_MANAGED", "CUSTOM_RPR_ADDED_CUSTOM_X"])
    assert d.traits == {"CUSTOM_GPU"}
    assert d.refused_traits == {"CUSTOM_RPR_MANAGED", "CUSTOM_RPR_ADDED_CUSTOM_X"}
    assert "CUSTOM_RPR_ADDED_CUSTOM_X" in d.refusal
    assert d.problem is None and d.resource_class  # the node is still offered


@pytest.mark.parametrize("skip, fields, reserved", [
    (False, {"instance_uuid": str(uuid.uuid4())}, 1),
    (True, {"instance_uuid": str(uuid.uuid4())}, 0),  # nova's workaround
    (True, {"instance_uuid": str(uuid.uuid4()), "provision_state": "active"}, 1),
    (True, {"maintenance": True}, 1),
])
def test_skip_reserve_in_use_as_nova_does(skip, fields, reserved):
    node = model.node_from_api({**AVAILABLE, **fields})
    assert model.desired(node, skip_reserve_in_use=skip).reserved == reserved


def test_no_provision_state_is_usable_as_in_nova():
    assert desired(provision_state=None).reserved == 0


def test_provider_traits_keep_nova_owned_and_drop_the_rest():
    d = desired(traits=["CUSTOM_GPU"])
    current = {"COMPUTE_NODE", "OWNER_NOVA", "CUSTOM_OLD", "CUSTOM_RPR_ADDED_CUSTOM_GPU",
               model.MANAGED_TRAIT}
    assert model.provider_traits(d, current) == {"CUSTOM_GPU", "COMPUTE_NODE", "OWNER_NOVA",
                                                 model.MANAGED_TRAIT}
    # nova-compute's driver keeps the marker where it is and does not add it
    assert model.provider_traits(d, {"COMPUTE_NODE"}, add_marker=False) == {
        "CUSTOM_GPU", "COMPUTE_NODE"}


@pytest.mark.parametrize("record, message", [
    ("not a dict", "not an object"),
    ({**AVAILABLE, "uuid": "../../etc"}, "not a UUID"),
    ({**AVAILABLE, "uuid": None}, "not a UUID"),
    ({**AVAILABLE, "maintenance": "yes"}, "maintenance"),
    ({**AVAILABLE, "traits": "CUSTOM_A"}, "traits"),
    ({**AVAILABLE, "instance_uuid": "nope"}, "instance_uuid"),
    ({**AVAILABLE, "provision_state": 5}, "provision_state"),
])
def test_odd_records_are_refused_with_the_field_named(record, message):
    with pytest.raises(model.InvalidNode, match=message):
        model.node_from_api(record)


@pytest.mark.parametrize("bad", ["custom-lower", "CUSTOM_A/../x", "CUSTOM_" + "X" * 300, 7])
def test_an_invalid_trait_name_costs_that_trait_not_the_node(bad):
    # As nova's driver: the node is reported (here: in maintenance, so reserved)
    # and only the trait is dropped, with a refusal to log.
    node = model.node_from_api({**AVAILABLE, "maintenance": True,
                                "traits": ["CUSTOM_GPU", bad]})
    d = model.desired(node)
    assert d.reserved == 1 and d.inventories[d.resource_class]["reserved"] == 1
    assert d.traits == {"CUSTOM_GPU"} and len(d.refused_traits) == 1
    assert "not a valid trait name" in d.refusal


def test_uuid_is_canonicalized():
    node = model.node_from_api({**AVAILABLE, "uuid": NODE.upper()})
    assert node.uuid == NODE


def test_names_are_validated_for_urls():
    assert model.valid_name("CUSTOM_GOLD")
    for bad in ("", "custom_gold", "CUSTOM GOLD", "CUSTOM_%2F", "A" * 256, None, 5):
        assert not model.valid_name(bad)


def test_every_read_of_a_node_shares_one_uuid_string():
    """At 100,000 nodes each extra copy of the uuids is about 8 MB (tox -e bench -- rss)."""
    u = str(uuid.uuid4())
    first = model.node_from_api({"uuid": u})
    again = model.node_from_api({"uuid": u.upper()})  # another string, same uuid
    assert first.uuid == u and again.uuid is first.uuid
