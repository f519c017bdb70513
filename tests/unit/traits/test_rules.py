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

"""rp_reporter.traits.rules: rule documents and files, refused in one line naming the place."""

import pathlib

import pytest

from rp_reporter import traits

REPO = pathlib.Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("doc, where", [
    ([], "top level"),
    ({"capabilitys": []}, "capabilitys: unknown section"),
    ({"capabilities": "boot_mode"}, "capabilities: want a list"),
    ({"capabilities": [""]}, "capabilities[0]"),
    ({"capabilities": ["a:b"]}, "capabilities[0]"),
    ({"capabilities": ["cpu_arch"]}, "property rule"),
    ({"capabilities": ["host"]}, "host state"),
    ({"capabilities": {"boot_mode": 3}}, "capabilities.boot_mode: want 'all'"),
    ({"capabilities": {"boot_mode": ["uefi", None]}}, "capabilities.boot_mode[1]"),
    ({"capabilities": {"boot_mode": ["a,b"]}}, "capabilities.boot_mode[0]"),
    ({"capabilities": {"secure_boot": [True]}}, "quote it ('true')"),
    ({"capabilities": {"boot_mode": {"prefix": "BOOT_"}}}, "capabilities.boot_mode.prefix"),
    ({"capabilities": {"boot_mode": {"prefix": "CUSTOM_RPR_"}}}, "own namespace"),
    ({"capabilities": {"boot_mode": {"valuez": "all"}}}, "unknown field 'valuez'"),
    ({"capabilities": {"boot_mode": ["x" * 300]}}, "at most 255"),
    ({"properties": {"memory_mb": "all"}}, "properties.memory_mb: unknown property"),
    ({"properties": ["cpu_arch"]}, "properties: want a mapping"),
    ({"ranges": {"property": "memory_mb"}}, "ranges: want a list"),
    ({"ranges": [{"property": "ram", "min": 1, "trait": "CUSTOM_X"}]}, "ranges[0].property"),
    ({"ranges": [{"property": "memory_mb", "trait": "CUSTOM_X"}]}, "ranges[0]: give min"),
    ({"ranges": [{"property": "memory_mb", "min": -1, "trait": "CUSTOM_X"}]},
     "ranges[0].min"),
    ({"ranges": [{"property": "memory_mb", "min": "1", "trait": "CUSTOM_X"}]},
     "ranges[0].min"),
    ({"ranges": [{"property": "cpus", "min": 8, "max": 4, "trait": "CUSTOM_X"}]},
     "min 8 is above max 4"),
    ({"ranges": [{"property": "cpus", "min": 8, "trait": "big"}]}, "ranges[0].trait"),
    ({"ranges": [{"property": "cpus", "min": 8, "trait": "HW_CPU_X86_AVX"}]},
     "ranges[0].trait"),
    ({"ranges": [{"property": "cpus", "min": 8, "trait": "CUSTOM_X", "step": 1}]},
     "unknown field 'step'"),
])
def test_bad_rules_are_one_line_naming_the_place(doc, where):
    with pytest.raises(traits.RulesError) as e:
        traits.rules_from_dict(doc, source="r.yaml")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("r.yaml: ")
    assert where in message


def test_rules_are_hashable_and_defaults_cover_the_documented_keys():
    hash(traits.DEFAULT_RULES)
    assert {r.key for r in traits.DEFAULT_RULES.capabilities} >= {
        "boot_mode", "secure_boot", "boot_option", "disk_label", "iscsi_boot"}
    assert traits.rules_from_dict(None).capabilities == ()


def test_shipped_rule_file_loads_and_equals_the_defaults():
    rules = traits.load_rules(REPO / "etc/rp_reporter/capability-rules.yaml")
    assert rules.capabilities == traits.DEFAULT_RULES.capabilities
    assert rules.properties == () and rules.ranges == ()


@pytest.mark.parametrize("content, where", [
    (None, "No such file"),
    ("capabilities: [boot_mode\n", "line 2"),
    ("capabilities:\n  - boot_mode\n  -: [\n", "bad YAML"),
    (b"\xff\xfe", "not UTF-8"),
    ("x" * (traits.RULES_MAX_BYTES + 1), "at most"),
    ("just a string", "top level"),
])
def test_load_rules_refuses_bad_files_in_one_line(tmp_path, content, where):
    path = tmp_path / "rules.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(traits.RulesError) as e:
        traits.load_rules(path)
    assert "\n" not in str(e.value) and str(e.value).startswith(str(path))
    assert where in str(e.value)


def test_load_rules_full_document(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("""
capabilities:
  boot_mode: [uefi]
  raid_level: all
  gpu: {values: all, prefix: CUSTOM_GPU_}
properties:
  cpu_arch: all
  vendor: [dell, hpe]
ranges:
  - {property: memory_mb, min: 262144, trait: CUSTOM_MEM_256G_PLUS}
  - {property: cpus, max: 16, trait: CUSTOM_CPUS_16_OR_FEWER}
""")
    rules = traits.load_rules(path)
    props = {"capabilities": "boot_mode:bios,raid_level:10,gpu:a100", "cpu_arch": "x86_64",
             "vendor": "supermicro", "memory_mb": "524288", "cpus": 64}
    assert traits.derive_traits(rules, props) == {
        "CUSTOM_CAP_RAID_LEVEL_10", "CUSTOM_GPU_A100", "CUSTOM_CPU_ARCH_X86_64",
        "CUSTOM_MEM_256G_PLUS"}
    props.update(capabilities="boot_mode:uefi", vendor="dell", cpus=8, memory_mb=1)
    assert traits.derive_traits(rules, props) == {
        "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CPU_ARCH_X86_64", "CUSTOM_VENDOR_DELL",
        "CUSTOM_CPUS_16_OR_FEWER"}


def test_a_rule_listing_a_value_that_makes_no_exact_trait_is_refused():
    with pytest.raises(traits.RulesError, match="makes no trait"):
        traits.rules_from_dict({"capabilities": {"boot_mode": ["UEFI"]}})
    # vendor is no flavor's spec: its spellings may fold into one trait.
    rules = traits.rules_from_dict({"properties": {"vendor": ["Dell"]}})
    assert traits.derive_traits(rules, {"vendor": "Dell"}) == {"CUSTOM_VENDOR_DELL"}
