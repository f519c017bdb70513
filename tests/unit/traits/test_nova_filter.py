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

"""rp_reporter.traits.nova_filter: the capability string as nova's Ironic driver parses it,
and the spec matching of nova's ComputeCapabilitiesFilter."""

import pytest

from rp_reporter import traits


@pytest.mark.parametrize("value, parsed, malformed", [
    (None, {}, []),
    ("", {}, []),
    ({}, {}, []),
    ("boot_mode:uefi,secure_boot:true", {"boot_mode": "uefi", "secure_boot": "true"}, []),
    ("a:b:c", {}, ["a:b:c"]),
    ("boot_mode:", {}, ["boot_mode:"]),
    (":uefi", {}, [":uefi"]),
    ("boot_mode", {}, ["boot_mode"]),
    ("boot_mode:uefi,,x:y", {"boot_mode": "uefi", "x": "y"}, [""]),
    (" boot_mode : uefi", {"boot_mode": " uefi"}, []),     # nova strips the key only
    ("k:a,k:b", {"k": "b"}, []),                            # the later one wins
    (42, {}, ["42"]),                                       # nova reads str(value)
])
def test_parse_capabilities_as_nova(value, parsed, malformed):
    assert traits.parse_capabilities(value) == (parsed, malformed)


def test_parse_survives_a_10kb_string():
    value = "boot_mode:uefi," + "x" * 10240
    parsed, malformed = traits.parse_capabilities(value)
    assert parsed == {"boot_mode": "uefi"} and len(malformed) == 1


@pytest.mark.parametrize("value, req, want", [
    ("uefi", "uefi", True), ("uefi", "bios", False), ("uefi", "s== uefi", True),
    ("uefi", "<or> bios <or> uefi", True), ("uefi", "<in> ef", True), ("8", ">= 4", True),
    ("x", ">= 4", False), ("uefi", "<or>", False), ("uefi", "s==", False),
    ("a b", "a b", True),
])
def test_match_spec_as_nova(value, req, want):
    assert traits.match_spec(value, req) is want


def test_capabilities_match():
    props = {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}
    assert traits.capabilities_match({"capabilities:boot_mode": "uefi"}, props)
    assert not traits.capabilities_match({"capabilities:boot_mode": "bios"}, props)
    assert not traits.capabilities_match({"capabilities:secure_boot": "true"}, props)
    assert traits.capabilities_match({"secure_boot": "true"}, props)     # unscoped, absent
    assert not traits.capabilities_match({"boot_mode": "bios"}, props)   # unscoped, present
    assert traits.capabilities_match({"cpu_arch": "x86_64", "hw:x": "1",
                                    "resources:VCPU": "0"}, props)
    assert not traits.capabilities_match({"cpu_arch": "x86_64"}, {})
    assert not traits.capabilities_match({"capabilities:boot_mode:x": "1"}, props)
