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

"""``rp-reporter status NODE --explain``: every rule, in words, from the model itself."""

import pytest

from rp_reporter import explain
from rp_reporter import model
from rp_reporter.sync import plan as planner

UUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
INSTANCE = "6c1a5c3a-58a4-4bb1-9d2c-8bb0b8b1d9a7"


def node(**fields):
    base = {"uuid": UUID, "resource_class": "baremetal-gold", "provision_state": "available",
            "power_state": "power off", "maintenance": False}
    return model.Node(**dict(base, **fields))


def said(rows):
    return dict(rows)


def held(reserved=0, rc="CUSTOM_BAREMETAL_GOLD", traits=("CUSTOM_RPR_MANAGED",), usages=None):
    return planner.Observed(UUID, 7, {rc: model.inventory(reserved)}, frozenset(traits), usages)


def test_a_schedulable_node_in_step():
    rows = said(explain.explain(node(traits=frozenset({"CUSTOM_GPU"})),
                                held(traits=("CUSTOM_RPR_MANAGED", "CUSTOM_GPU")),
                                explain.Scope(host="a1", owner="a1", membership="alive")))
    assert "CUSTOM_BAREMETAL_GOLD" in rows["class"] and "'baremetal-gold'" in rows["class"]
    assert rows["reserved"].startswith("0: schedulable")
    assert rows["owner"].startswith("a1 (this host) syncs it")
    assert rows["in step"].startswith("yes")
    assert rows["flavor"].startswith("resources:CUSTOM_BAREMETAL_GOLD=1 resources:VCPU=0 "
                                     "resources:MEMORY_MB=0 resources:DISK_GB=0")
    assert "trait:CUSTOM_GPU=required" in rows["flavor"] and "can land now" in rows["flavor"]
    assert rows["provider"].startswith(f"uuid and name {UUID}")


@pytest.mark.parametrize("fields, reason", [
    ({"maintenance": True}, "it is in maintenance"),
    ({"power_state": None}, "its power state is unknown (none)"),
    ({"power_state": "error"}, "its power state is error"),
    ({"provision_state": "active", "instance_uuid": INSTANCE}, "provision state is active"),
    ({"provision_state": "manageable"}, "its provision state is manageable, not available"),
    ({"instance_uuid": INSTANCE}, f"instance {INSTANCE} is on it"),
])
def test_why_it_is_reserved(fields, reason):
    n = node(**fields)
    rows = said(explain.explain(n, None))
    assert model.desired(n).reserved == 1
    assert rows["reserved"].startswith("1, so no new instance lands here, because ")
    assert reason in rows["reserved"]
    assert "cannot land now (reserved)" in rows["flavor"]


def test_skip_reserve_in_use_is_said():
    n = node(instance_uuid=INSTANCE)
    rows = said(explain.explain(n, None, explain.Scope(skip_reserve_in_use=True)))
    assert "skip_reserve_in_use is set" in rows["in use"]
    assert rows["reserved"].startswith("0: schedulable")


@pytest.mark.parametrize("rc, why", [(None, "node has no resource_class"),
                                     ("---", "normalizes to nothing")])
def test_why_it_is_skipped(rc, why):
    rows = said(explain.explain(node(resource_class=rc), None))
    assert rows["class"].startswith("skipped: ") and why in rows["class"]
    assert "resource-class set --resource-class CLASS" in rows["class"]
    assert "reserved" not in rows
    assert rows["placement"].startswith("no provider, and none is created")
    assert rows["in step"].startswith("yes")
    assert rows["flavor"].startswith("no flavor lands here")


def test_no_provider_yet():
    rows = said(explain.explain(node(), None))
    assert rows["placement"].startswith("no provider yet")
    assert rows["in step"] == ("no: the next sync writes create the provider; set traits to "
                               "CUSTOM_RPR_MANAGED; set inventory CUSTOM_BAREMETAL_GOLD "
                               "reserved 0")
    assert "once Placement is in step" in rows["flavor"]


def test_out_of_step_traits_and_refusals():
    n = node(traits=frozenset({"CUSTOM_RPR_SNEAKY", "HW_CPU_X86_AVX2"}), maintenance=True)
    observed = held(traits=("CUSTOM_RPR_MANAGED", "CUSTOM_STALE", "COMPUTE_NODE"))
    rows = said(explain.explain(n, observed))
    assert "CUSTOM_RPR_SNEAKY" in rows["traits refused"]
    assert rows["traits removed"].startswith("CUSTOM_STALE:")
    assert "nova's own COMPUTE_NODE" in rows["traits"]
    assert "HW_CPU_X86_AVX2" in rows["traits"]
    assert rows["in step"].startswith("no: the next sync writes set traits to COMPUTE_NODE, "
                                      "CUSTOM_RPR_MANAGED, HW_CPU_X86_AVX2; set inventory "
                                      "CUSTOM_BAREMETAL_GOLD reserved 1")
    assert "holds CUSTOM_BAREMETAL_GOLD reserved 0 of 1; generation 7" in rows["placement"]


def test_a_class_change_under_an_allocation():
    n = node(resource_class="silver", instance_uuid=INSTANCE, provision_state="active")
    observed = held(reserved=1, usages={"CUSTOM_BAREMETAL_GOLD": 1})
    assert planner.needs_usages(model.desired(n), observed)
    rows = said(explain.explain(n, observed))
    assert rows["allocation"].startswith("CUSTOM_BAREMETAL_GOLD still carries an allocation")
    assert "CUSTOM_SILVER reserved 1" in rows["in step"]
    assert "CUSTOM_BAREMETAL_GOLD reserved 1" in rows["in step"]  # kept beside it


def test_scope_and_owner():
    n = node(shard="s2", conductor_group="rack1")
    rows = said(explain.explain(n, None, explain.Scope(shard="s1", conductor_group="RACK1")))
    assert rows["scope"].startswith("outside this reporter's scope (its shard is s2")
    assert "conductor" not in rows["scope"]  # groups compare case-insensitively, as Ironic's
    assert rows["owner"].startswith("no live agent")
    rows = said(explain.explain(n, None, explain.Scope(host="a1", owner="a2",
                                                       membership="alive")))
    assert rows["owner"].startswith("a2 syncs it") and "(alive)" in rows["owner"]


def test_explanation_follows_the_model_for_every_state():
    """Reserved exactly when the model says so, whatever the fields."""
    for maintenance in (False, True):
        for power in ("power on", "error", None):
            for provision in ("available", None, "active", "cleaning"):
                for instance in (None, INSTANCE):
                    n = node(maintenance=maintenance, power_state=power,
                             provision_state=provision, instance_uuid=instance)
                    rows = said(explain.explain(n, None))
                    assert rows["reserved"][0] == str(model.desired(n).reserved)


def test_render():
    text = explain.render([("class", "x"), ("in step", "yes")])
    assert text == "  class: x\nin step: yes"


def test_tenancy_is_said_only_when_it_is_on():
    lessee = "l" * 32
    rows = said(explain.explain(node(owner="o" * 32, lessee=lessee), held(), explain.Scope()))
    assert "tenancy" not in rows
    on = explain.Scope(tenancy_rule="lessee_else_owner")
    rows = said(explain.explain(node(owner="o" * 32, lessee=lessee), held(), on))
    assert rows["tenancy"].startswith(f"may deploy: lessee {lessee}. Its provider is in "
                                      f"the nova aggregate rp-reporter-tenant-{lessee}")
    automatic = said(explain.explain(node(lessee=lessee, automatic_lessee=True), held(), on))
    assert automatic["tenancy"].startswith("public: nobody claims it; lessee")
    assert "carries CUSTOM_BAREMETAL_PUBLIC" in automatic["tenancy"]


def test_the_aggregates_placement_holds_are_shown_when_read():
    observed = planner.Observed(UUID, 7, {"CUSTOM_BAREMETAL_GOLD": model.inventory(0)},
                                frozenset({"CUSTOM_RPR_MANAGED"}), aggregates=frozenset({"a-1"}))
    rows = said(explain.explain(node(), observed, explain.Scope()))
    assert rows["placement"].endswith("; aggregates a-1")


def test_an_aggregate_write_is_said_in_words():
    desired = model.Desired(UUID, UUID, "CUSTOM_BAREMETAL_GOLD", 0, frozenset(),
                            aggregates=frozenset({"a-2"}), managed_aggregates=frozenset({"a-2"}))
    (op,) = planner.plan(desired, planner.Observed(
        UUID, 7, {"CUSTOM_BAREMETAL_GOLD": model.inventory(0)},
        frozenset({"CUSTOM_RPR_MANAGED"}), {}, frozenset()))
    assert explain._op_words(op) == "set aggregates to a-2"
