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

"""Operator commands against real Ironic and Placement: set, unset, audit, status."""

import pytest

from tests.functional.conftest import run_json
from tools.bench import common as bench_common

GOLD = "CUSTOM_BAREMETAL_GOLD"
pytestmark = pytest.mark.functional


def test_set_by_filter_on_100_nodes_in_one_call(ironic, cli):
    unclassified = bench_common.load_nodes(ironic, 100, classes=(None,))
    classified = ironic.create_many(3, state="enroll", resource_class="baremetal-silver")
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "baremetal-gold",
                             "--no-class")
    assert code == 0
    assert {r["node"] for r in rows} == set(unclassified)
    assert {r["result"] for r in rows} == {"changed"}
    assert {r["placement_class"] for r in rows} == {GOLD}
    assert rows[0]["flavor_extra_specs"] == (
        f"resources:{GOLD}=1 resources:VCPU=0 resources:MEMORY_MB=0 resources:DISK_GB=0")
    assert {ironic.get(n)["resource_class"] for n in unclassified} == {"baremetal-gold"}
    assert {ironic.get(n)["resource_class"] for n in classified} == {"baremetal-silver"}
    # Again: nothing left to match.
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "baremetal-gold",
                             "--no-class")
    assert code == 0 and rows == []


def test_set_dry_run_shows_before_and_after_and_changes_nothing(ironic, cli):
    node = ironic.create(state="enroll", resource_class="old")
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "new", node,
                             "--dry-run")
    assert code == 0
    assert [(r["before"], r["after"], r["result"]) for r in rows] == [
        ("old", "new", "would change")]
    assert ironic.get(node)["resource_class"] == "old"


def test_set_filters_by_property_glob_and_class(ironic, cli):
    big, small, other = (ironic.create(state="enroll", resource_class="pool") for _ in range(3))
    ironic.patch(big, properties={"memory_mb": 262144})
    ironic.patch(small, properties={"memory_mb": 65536})
    ironic.patch(other, properties={"memory_mb": 262144}, resource_class="elsewhere")
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "bm-large",
                             "--current-class", "pool", "--property", "memory_mb=262144")
    assert code == 0 and [r["node"] for r in rows] == [big]
    assert ironic.get(small)["resource_class"] == "pool"
    ironic.patch(small, name=f"rack9-{small[:8]}")
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "bm-r9",
                             "--name-glob", "rack9-*")
    assert code == 0 and [r["node"] for r in rows] == [small]


@pytest.mark.parametrize("name, message", [
    ("x" * 81, "Ironic takes at most 80"),
    ("---", "normalizes to nothing"),
    ("  ", "empty"),
])
def test_invalid_name_is_refused_before_any_change(ironic, cli, name, message):
    nodes = ironic.create_many(2, state="enroll", resource_class=None)
    code, out, err = cli("resource-class", "set", f"--resource-class={name}", "--no-class")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err and "Traceback" not in err
    assert all(ironic.get(n)["resource_class"] is None for n in nodes)


def test_set_without_nodes_or_filter_is_refused(cli):
    code, out, err = cli("resource-class", "set", "--resource-class", "gold")
    assert code == 2 and "name the nodes, or select them with a filter" in err


def test_per_node_failures_are_listed_and_exit_1(ironic, cli):
    node = ironic.create(state="enroll", resource_class=None)
    missing = "00000000-0000-4000-8000-000000000000"
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "gold", node,
                             missing)
    assert code == 1
    results = {r["node"]: r["result"] for r in rows}
    assert results == {node: "changed", missing: "failed: no such node"}
    assert ironic.get(node)["resource_class"] == "gold"


def test_unset(ironic, cli):
    node = ironic.create(state="enroll")
    code, rows, _ = run_json(cli, "resource-class", "unset", node)
    assert code == 0 and rows[0]["before"] == "baremetal-gold" and rows[0]["after"] == ""
    assert ironic.get(node)["resource_class"] is None


def test_audit_lists_exactly_the_unclassified_and_the_drifted(ironic, placement, cli):
    unclassified = ironic.create_many(2, state="enroll", resource_class=None)
    classified = ironic.create_many(5, state="enroll")
    ironic.patch(classified[4], resource_class="Baremetal.Gold")  # same class, other spelling
    assert cli("reconcile")[0] == 0
    drift_ironic, drift_placement = classified[0], classified[1]
    ironic.set_traits(drift_ironic, ["CUSTOM_NEW"])  # Ironic changed, not yet reported
    inv = placement._call("GET", f"/resource_providers/{drift_placement}/inventories")
    inv["inventories"][GOLD]["reserved"] = 0  # someone wrote Placement behind our back
    placement._call("PUT", f"/resource_providers/{drift_placement}/inventories", json=inv)

    code, rows, _ = run_json(cli, "resource-class", "audit")
    assert code == 1
    by_kind = {}
    for row in rows:
        by_kind.setdefault(row["finding"], {})[row["subject"]] = row["detail"]
    assert set(by_kind["unclassified"]) == set(unclassified)
    assert set(by_kind["drift"]) == {drift_ironic, drift_placement}
    assert "+CUSTOM_NEW" in by_kind["drift"][drift_ironic]
    assert "reserved=0" in by_kind["drift"][drift_placement]
    assert by_kind["class_in_use"] == {GOLD: "5 nodes"}
    assert "'Baremetal.Gold' 'baremetal-gold'" in by_kind["spellings"][GOLD]

    # Fix everything: classes set, one spelling, reconciled: the audit is clean.
    assert cli("resource-class", "set", "--resource-class", "baremetal-gold", "--no-class",
               *unclassified)[0] == 0
    assert cli("resource-class", "set", "--resource-class", "baremetal-gold",
               classified[4])[0] == 0
    assert cli("reconcile")[0] == 0
    code, rows, _ = run_json(cli, "resource-class", "audit")
    assert code == 0 and {r["finding"] for r in rows} == {"class_in_use"}


def test_status_shows_reserved_in_both_columns_once_synced(ironic, cli):
    node = ironic.create(maintenance=True)
    code, (row,), _ = run_json(cli, "status", node)
    assert code == 0
    assert (row["desired_class"], row["desired_reserved"]) == (GOLD, "1")
    assert row["placement_class"] == "(no provider)" and row["in_step"] is False
    assert cli("reconcile")[0] == 0
    code, (row,), _ = run_json(cli, "status", node)
    assert row["maintenance"] is True
    assert (row["desired_reserved"], row["placement_class"], row["placement_reserved"]) == (
        "1", GOLD, "1")
    assert row["in_step"] is True and row["owner"] == "rp-local"


def test_status_with_tenancy_says_who_may_deploy_and_why(ironic, cli, stack, shard, tmp_path):
    """Tenancy's decision read from the real Ironic record (owner, lessee); nova is never
    called by status (its endpoint here answers nothing)."""
    conf = tmp_path / "tenancy.conf"
    conf.write_text(stack.reporter_conf(
        ironic={"shard": shard}, tenancy={"enabled": "True", "public_owners": "ops"},
        nova={"auth_type": "none", "endpoint_override": "http://127.0.0.1:9"}))
    leased, operators = ironic.create(), ironic.create()
    lessee = "l" * 32
    ironic.patch(leased, owner="o" * 32, lessee=lessee)
    ironic.patch(operators, owner="ops")
    code, rows, _ = run_json(cli, "status", leased, operators, config_file=str(conf))
    assert code == 0
    assert {r["node"]: r["may_deploy"] for r in rows} == {leased: lessee, operators: "public"}
    code, rows, _ = run_json(cli, "status", "--explain", leased, config_file=str(conf))
    said = {r["rule"]: r["explanation"] for r in rows}
    assert said["tenancy"].startswith(f"may deploy: lessee {lessee}. Its provider is in the "
                                      f"nova aggregate rp-reporter-tenant-{lessee}")
    code, rows, _ = run_json(cli, "status", leased)  # tenancy off: no such column
    assert "may_deploy" not in rows[0]
