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

"""rp_reporter.traits.flavors: a flavor's capability specs as required traits, only where
Placement then picks what nova's filter picks."""

import hypothesis
import pytest
from hypothesis import strategies as st

from rp_reporter import traits


def test_translate_a_typical_flavor():
    t = traits.translate_flavor(traits.DEFAULT_RULES, {
        "capabilities:boot_mode": "uefi", "capabilities:secure_boot": "s== true",
        "resources:CUSTOM_BAREMETAL_GOLD": "1", "hw:cpu_policy": "dedicated"})
    assert t.complete
    assert t.specs == {
        "hw:cpu_policy": "dedicated",
        "resources:CUSTOM_BAREMETAL_GOLD": "1", "resources:DISK_GB": "0",
        "resources:MEMORY_MB": "0", "resources:VCPU": "0",
        "trait:CUSTOM_CAP_BOOT_MODE_UEFI": "required",
        "trait:CUSTOM_CAP_SECURE_BOOT_TRUE": "required"}


@pytest.mark.parametrize("key, value, reason", [
    ("capabilities:boot_mode", "<or> uefi <or> bios", "'<or>'"),
    ("capabilities:boot_mode", "<in> uef", "substring"),
    ("capabilities:secure_boot", "s!= false", "string comparison"),
    ("capabilities:cpus", ">= 4", "number comparison"),
    ("capabilities:profile", "gold", "no rule derives a trait from 'profile'"),
    ("boot_mode", "uefi", "unscoped"),
    ("capabilities:cpu_info:maxphysaddr:bits", ">= 42", "nested"),
    ("capabilities:boot_mode", "", "empty"),
    ("capabilities:boot_mode", "a:b", "','"),
    ("capabilities:host", "h1", "host state"),
    ("capabilities:cpu_arch", "x86_64", "no rule"),
    ("hw:maxphysaddr_bits", "42", "cpu_info"),
])
def test_translate_names_what_it_cannot_translate(key, value, reason):
    t = traits.translate_flavor(traits.DEFAULT_RULES, {key: value,
                                                   "resources:CUSTOM_GOLD": "1"})
    ((k, v, why),) = t.untranslated
    assert (k, v) == (key, value) and reason in why
    assert not any(s.startswith("trait:") for s in t.specs)


def test_translate_cpu_arch_with_a_property_rule_and_the_resource_class():
    rules = traits.rules_from_dict({"properties": {"cpu_arch": "all"}})
    t = traits.translate_flavor(rules, {"cpu_arch": "x86_64"}, resource_class="CUSTOM_GOLD")
    assert t.complete and t.specs["trait:CUSTOM_CPU_ARCH_X86_64"] == "required"
    assert t.specs["resources:CUSTOM_GOLD"] == "1"
    t = traits.translate_flavor(rules, {"cpu_arch": "x86_64"})
    assert [u[0] for u in t.untranslated] == ["resources:CUSTOM_*"]


_values = st.sampled_from(["uefi", "bios", "UEFI", " uefi", "true", "false"])


@hypothesis.given(st.dictionaries(st.sampled_from(["boot_mode", "secure_boot", "profile"]),
                                  _values, max_size=3),
                  st.dictionaries(st.sampled_from(["capabilities:boot_mode",
                                                   "capabilities:secure_boot",
                                                   "capabilities:profile"]),
                                  st.one_of(_values, _values.map(lambda v: f"s== {v}")),
                                  max_size=3))
def test_a_complete_translation_selects_what_the_filter_selects(node_caps, specs):
    """Spellings that differ only in case or spaces included: required traits pass a
    node exactly when the filter does."""
    rules = traits.rules_from_dict({"capabilities": ["boot_mode", "secure_boot"]})
    t = traits.translate_flavor(rules, dict(specs, **{"resources:CUSTOM_X": "1"}))
    hypothesis.assume(t.complete)
    props = {"capabilities": ",".join(f"{k}:{v}" for k, v in node_caps.items())}
    derived = traits.derive_traits(rules, props)
    required = {k[len("trait:"):] for k, v in t.specs.items() if v == "required"}
    assert (required <= derived) == traits.capabilities_match(specs, props)


def test_flavor_extra_specs_for_a_class_are_the_translations_zeros_and_the_class():
    specs = traits.flavor_extra_specs("CUSTOM_BAREMETAL_GOLD")
    assert specs == ("resources:CUSTOM_BAREMETAL_GOLD=1 resources:VCPU=0 "
                     "resources:MEMORY_MB=0 resources:DISK_GB=0")
    t = traits.translate_flavor(traits.DEFAULT_RULES, {},
                                resource_class="CUSTOM_BAREMETAL_GOLD")
    assert dict(s.split("=") for s in specs.split()) == t.specs
