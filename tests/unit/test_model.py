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


def test_traits_carry_ownership_markers():
    d = desired(traits=["CUSTOM_GPU", "HW_CPU_X86_AVX2"])
    assert d.traits == {"CUSTOM_GPU", "HW_CPU_X86_AVX2"}
    assert d.placement_traits == {"CUSTOM_GPU", "HW_CPU_X86_AVX2", model.MANAGED_TRAIT,
                                  "CUSTOM_RPR_ADDED_CUSTOM_GPU",
                                  "CUSTOM_RPR_ADDED_HW_CPU_X86_AVX2"}


def test_trait_too_long_for_a_marker_is_added_without_one():
    long_trait = "CUSTOM_" + "A" * 240
    d = desired(traits=[long_trait])
    assert long_trait in d.placement_traits
    assert not any(t.endswith(long_trait) and t != long_trait for t in d.placement_traits)


@pytest.mark.parametrize("record, message", [
    ("not a dict", "not an object"),
    ({**AVAILABLE, "uuid": "../../etc"}, "not a UUID"),
    ({**AVAILABLE, "uuid": None}, "not a UUID"),
    ({**AVAILABLE, "maintenance": "yes"}, "maintenance"),
    ({**AVAILABLE, "traits": "CUSTOM_A"}, "traits"),
    ({**AVAILABLE, "traits": ["custom-lower"]}, "not a valid trait"),
    ({**AVAILABLE, "traits": ["CUSTOM_A/../x"]}, "not a valid trait"),
    ({**AVAILABLE, "instance_uuid": "nope"}, "instance_uuid"),
    ({**AVAILABLE, "provision_state": 5}, "provision_state"),
])
def test_odd_records_are_refused_with_the_field_named(record, message):
    with pytest.raises(model.InvalidNode, match=message):
        model.node_from_api(record)


def test_uuid_is_canonicalized():
    node = model.node_from_api({**AVAILABLE, "uuid": NODE.upper()})
    assert node.uuid == NODE


def test_names_are_validated_for_urls():
    assert model.valid_name("CUSTOM_GOLD")
    for bad in ("", "custom_gold", "CUSTOM GOLD", "CUSTOM_%2F", "A" * 256, None, 5):
        assert not model.valid_name(bad)
