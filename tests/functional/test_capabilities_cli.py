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

"""Capabilities as traits through the CLI, against real Ironic and Placement:
``traits from-capabilities``, ``flavor translate`` and the audit's capability rows."""

import json

import pytest

from rp_reporter.traits import RECORD_KEY
from tests.functional.conftest import run_json

pytestmark = pytest.mark.functional

UEFI, BIOS = "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CAP_BOOT_MODE_BIOS"
SECURE = "CUSTOM_CAP_SECURE_BOOT_TRUE"


def traits(ironic, node):
    return set(ironic.get(node)["traits"] or ())


def recorded(ironic, node):
    return (ironic.get(node)["extra"] or {}).get(RECORD_KEY)


def with_caps(ironic, capabilities, **kw):
    node = ironic.create(state="enroll", **kw)
    ironic.patch(node, properties={"capabilities": capabilities, "cpu_arch": "x86_64"})
    return node


def test_nodes_get_their_derived_traits_dry_run_first_then_once(ironic, placement, cli):
    uefi = with_caps(ironic, "boot_mode:uefi,secure_boot:true,profile:gold")
    bios = with_caps(ironic, "boot_mode:bios")
    plain = ironic.create(state="enroll")

    code, rows, _ = run_json(cli, "traits", "from-capabilities", "--dry-run")
    assert code == 0
    by_node = {r["node"]: r for r in rows}
    assert by_node[uefi]["added"] == f"{UEFI} {SECURE}"
    assert by_node[uefi]["result"] == "would change"
    assert by_node[plain]["result"] == "unchanged"
    assert traits(ironic, uefi) == set() and recorded(ironic, uefi) is None

    code, rows, _ = run_json(cli, "traits", "from-capabilities")
    assert code == 0
    assert {r["node"]: r["result"] for r in rows} == {
        uefi: "changed", bios: "changed", plain: "unchanged"}
    assert traits(ironic, uefi) == {UEFI, SECURE} and traits(ironic, bios) == {BIOS}
    assert recorded(ironic, uefi) == sorted([UEFI, SECURE])
    assert traits(ironic, plain) == set()

    code, rows, _ = run_json(cli, "traits", "from-capabilities")
    assert code == 0 and {r["result"] for r in rows} == {"unchanged"}

    # Reconcile carries them to the providers.
    assert cli("reconcile")[0] == 0
    assert {UEFI, SECURE} <= set(placement.provider_trait_names(uefi))
    assert BIOS in set(placement.provider_trait_names(bios))


def test_a_changed_capability_swaps_the_derived_trait_and_keeps_hand_set_ones(ironic, cli):
    # UEFI was set by hand before anything derived it; CUSTOM_HAND is the operator's too.
    node = with_caps(ironic, "boot_mode:uefi,secure_boot:true",
                     traits=(UEFI, "CUSTOM_HAND"))
    code, (row,), _ = run_json(cli, "traits", "from-capabilities", node)
    assert code == 0 and row["added"] == SECURE and row["removed"] == ""
    assert recorded(ironic, node) == [SECURE]  # UEFI was there before: not ours

    ironic.patch(node, properties={"capabilities": "boot_mode:bios,secure_boot:false"})
    code, (row,), _ = run_json(cli, "traits", "from-capabilities", node)
    assert code == 0
    assert row["added"] == f"{BIOS} CUSTOM_CAP_SECURE_BOOT_FALSE"
    assert row["removed"] == SECURE  # ours, no longer derived
    assert traits(ironic, node) == {UEFI, "CUSTOM_HAND", BIOS, "CUSTOM_CAP_SECURE_BOOT_FALSE"}
    assert recorded(ironic, node) == sorted([BIOS, "CUSTOM_CAP_SECURE_BOOT_FALSE"])

    # Capabilities gone altogether: only what we added goes.
    ironic.patch(node, properties={})
    code, (row,), _ = run_json(cli, "traits", "from-capabilities", node)
    assert code == 0 and traits(ironic, node) == {UEFI, "CUSTOM_HAND"}
    assert recorded(ironic, node) == []


def test_a_trait_set_by_hand_after_we_added_it_is_still_ours_to_remove_only_if_recorded(
        ironic, cli):
    node = with_caps(ironic, "boot_mode:uefi")
    assert cli("traits", "from-capabilities", node)[0] == 0
    # The operator replaces the whole trait list, keeping ours and adding theirs.
    ironic.set_traits(node, [UEFI, "CUSTOM_MINE"])
    ironic.patch(node, properties={"capabilities": "boot_mode:bios"})
    assert cli("traits", "from-capabilities", node)[0] == 0
    assert traits(ironic, node) == {BIOS, "CUSTOM_MINE"}


@pytest.mark.parametrize("content, where", [
    ("capabilities: [boot_mode\n", "line 2"),
    ("capabilities: {boot_mode: {prefix: BOOT_}}\n", "capabilities.boot_mode.prefix"),
    ("ranges: [{property: memory_mb, min: 9, max: 1, trait: CUSTOM_X}]\n", "ranges[0]"),
    (None, "No such file"),
])
def test_a_bad_rule_file_is_one_line_exit_2_and_nothing_written(ironic, cli, tmp_path,
                                                                content, where):
    node = with_caps(ironic, "boot_mode:uefi")
    rules = tmp_path / "rules.yaml"
    if content is not None:
        rules.write_text(content)
    code, out, err = cli("traits", "from-capabilities", "--rules", str(rules))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("rp-reporter: error: bad rule file: ") and where in line
    assert traits(ironic, node) == set() and recorded(ironic, node) is None


def test_the_config_rules_file_is_used(ironic, cli, write_conf, tmp_path):
    node = with_caps(ironic, "profile:gold,boot_mode:uefi")
    rules = tmp_path / "rules.yaml"
    rules.write_text("capabilities: {profile: [gold]}\nproperties: {cpu_arch: all}\n")
    conf = write_conf(traits={"rules_file": str(rules)})
    code, (row,), _ = run_json(cli, "traits", "from-capabilities", node, config_file=conf)
    assert code == 0 and row["added"] == "CUSTOM_CAP_PROFILE_GOLD CUSTOM_CPU_ARCH_X86_64"


def test_odd_capability_strings_say_so_in_one_line_and_change_nothing(ironic, cli):
    odd = {
        "abc": "a:b:c",
        "empty": "boot_mode:,secure_boot:",
        "huge": "boot_mode:" + "u" * 10240,
    }
    nodes = {name: with_caps(ironic, value, traits=("CUSTOM_HAND",))
             for name, value in odd.items()}
    code, rows, err = run_json(cli, "traits", "from-capabilities", *nodes.values())
    assert code == 0
    assert {r["result"] for r in rows} == {"unchanged"}
    lines = err.strip().splitlines()
    assert len(lines) == 4  # one per odd piece: a:b:c, two empty values, the long one
    assert all(len(line) < 400 for line in lines)
    assert any(nodes["abc"] in line and "malformed capability 'a:b:c'" in line
               for line in lines)
    assert any(nodes["huge"] in line and "at most 255" in line for line in lines)
    for node in nodes.values():
        assert traits(ironic, node) == {"CUSTOM_HAND"} and recorded(ironic, node) is None


def test_a_missing_node_is_listed_and_the_exit_is_1(ironic, cli):
    node = with_caps(ironic, "boot_mode:uefi")
    code, rows, _ = run_json(cli, "traits", "from-capabilities", node, "no-such-node")
    assert code == 1
    assert {r["node"]: r["result"] for r in rows} == {
        node: "changed", "no-such-node": "failed: no such node"}


def test_filters_select_the_nodes(ironic, cli):
    gold = with_caps(ironic, "boot_mode:uefi")
    silver = with_caps(ironic, "boot_mode:uefi", resource_class="baremetal-silver")
    code, rows, _ = run_json(cli, "traits", "from-capabilities", "--resource-class",
                             "baremetal-silver")
    assert code == 0 and [r["node"] for r in rows] == [silver]
    assert traits(ironic, gold) == set()


def test_flavor_translate_from_flavor_json(cli, tmp_path):
    new = tmp_path / "new.json"
    new.write_text(json.dumps({"name": "bm-uefi", "properties": {
        "capabilities:boot_mode": "uefi", "resources:CUSTOM_BAREMETAL_GOLD": "1"}}))
    old = tmp_path / "old.json"  # older clients print properties as a string
    old.write_text(json.dumps({"name": "bm-old", "properties":
                               "capabilities:secure_boot='s== true', "
                               "capabilities:boot_mode='<or> uefi <or> bios', "
                               "resources:CUSTOM_BAREMETAL_GOLD='1'"}))
    code, rows, _ = run_json(cli, "flavor", "translate", "--flavor-json", str(new))
    assert code == 0
    assert {(r["spec"], r["value"], r["status"]) for r in rows} == {
        (f"trait:{UEFI}", "required", "translated"),
        ("resources:CUSTOM_BAREMETAL_GOLD", "1", "kept"),
        ("resources:VCPU", "0", "added"), ("resources:MEMORY_MB", "0", "added"),
        ("resources:DISK_GB", "0", "added")}

    code, rows, err = run_json(cli, "flavor", "translate", "--flavor-json", str(old))
    assert code == 1
    statuses = {r["spec"]: r["status"] for r in rows}
    assert statuses[f"trait:{SECURE}"] == "translated"
    assert statuses["capabilities:boot_mode"] == "untranslatable"
    assert "'<or>'" in err and len(err.strip().splitlines()) == 1

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, out, err = cli("flavor", "translate", "--flavor-json", str(bad))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not JSON" in err


def test_audit_counts_capabilities_and_a_flavor_before_and_after(ironic, cli, tmp_path):
    nodes = [with_caps(ironic, "boot_mode:uefi") for _ in range(2)]
    with_caps(ironic, "boot_mode:bios")
    assert cli("reconcile")[0] == 0
    flavor = tmp_path / "f.json"
    flavor.write_text(json.dumps({"name": "bm-uefi", "properties": {
        "capabilities:boot_mode": "uefi", "resources:CUSTOM_BAREMETAL_GOLD": "1"}}))
    code, rows, _ = run_json(cli, "resource-class", "audit", "--flavor-json", str(flavor))
    assert code == 0, rows
    by_kind = {(r["finding"], r["subject"]): r["detail"] for r in rows}
    assert by_kind[("capability", "boot_mode")].startswith("3 nodes: bios (1), uefi (2)")
    assert "before 2 nodes" in by_kind[("flavor", "bm-uefi")]
    assert "after 0 nodes" in by_kind[("flavor", "bm-uefi")]
    assert cli("traits", "from-capabilities", *nodes)[0] == 0
    code, rows, _ = run_json(cli, "resource-class", "audit", "--flavor-json", str(flavor))
    detail = {(r["finding"], r["subject"]): r["detail"] for r in rows}[("flavor", "bm-uefi")]
    assert "before 2 nodes" in detail and "after 2 nodes" in detail
