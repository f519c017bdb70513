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

"""rp_reporter.cli.flavor_specs: flavors and resource classes as the operator gives them."""

import json

import pytest

from rp_reporter.cli import app
from rp_reporter.cli import flavor_specs


def test_properties_as_a_mapping_or_as_older_clients_print_them():
    assert flavor_specs.parse_properties({"a": 1, "b": None}, "f") == {"a": "1", "b": ""}
    assert flavor_specs.parse_properties(
        "capabilities:boot_mode='<or> uefi <or> bios', resources:CUSTOM_GOLD='1'", "f") == {
        "capabilities:boot_mode": "<or> uefi <or> bios", "resources:CUSTOM_GOLD": "1"}
    assert flavor_specs.parse_properties(None, "f") == {}
    with pytest.raises(app.UsageError, match="f: cannot read properties"):
        flavor_specs.parse_properties("a=b", "f")
    with pytest.raises(app.UsageError, match="properties is a list"):
        flavor_specs.parse_properties([], "f")


def test_load_flavors_names_each_and_refuses_what_is_not_a_flavor(tmp_path):
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"name": "bm", "properties": {"a": "b"}},
                                {"id": "f2", "extra_specs": {}}, {}]))
    assert flavor_specs.load_flavors(str(path)) == [
        ("bm", {"a": "b"}), ("f2", {}), (f"{path}[2]", {})]
    path.write_text("[3]")
    with pytest.raises(app.UsageError, match=r"\[0\] is not a flavor object"):
        flavor_specs.load_flavors(str(path))


def test_spec_pairs_and_the_class_a_flavor_asks():
    specs = flavor_specs.spec_pairs(["resources:CUSTOM_GOLD=1", "k=a=b"])
    assert specs == {"resources:CUSTOM_GOLD": "1", "k": "a=b"}
    assert flavor_specs.flavor_class(specs) == "CUSTOM_GOLD"
    assert flavor_specs.flavor_class({"resources:VCPU": "1"}) is None
    with pytest.raises(app.UsageError, match="want KEY=VALUE"):
        flavor_specs.spec_pairs(["nope"])


@pytest.mark.parametrize("name, message", [
    ("x" * 81, "Ironic takes at most 80"), ("---", "normalizes to nothing"), ("  ", "empty"),
])
def test_a_bad_class_name_is_refused(name, message):
    with pytest.raises(app.UsageError, match=message):
        flavor_specs.placement_class(name)


def test_a_class_name_becomes_the_placement_class():
    assert flavor_specs.placement_class("baremetal-gold") == "CUSTOM_BAREMETAL_GOLD"
