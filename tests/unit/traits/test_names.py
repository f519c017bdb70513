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

"""rp_reporter.traits.names: the trait a value becomes, and the names Placement refuses."""

import pytest

from rp_reporter import traits
from rp_reporter.traits import names


@pytest.mark.parametrize("text, name", [
    ("boot_mode", "BOOT_MODE"), ("gpt-x", "GPT_X"), ("1+0", "1_0"), ("uéfi", "U_FI"), (42, "42"),
])
def test_normalize(text, name):
    assert traits.normalize(text) == name


@pytest.mark.parametrize("name, problem", [
    (None, "empty"), ("", "empty"), ("CUSTOM_" + "X" * 300, "at most 255"),
    ("CUSTOM_a", "is not ^[A-Z0-9_]+$"), ("HW_CPU_X86_AVX", "does not start with CUSTOM_"),
    ("CUSTOM_", "does not start with CUSTOM_"), ("CUSTOM_RPR_X", "own namespace"),
])
def test_trait_problem_names_why(name, problem):
    assert problem in traits.trait_problem(name)


def test_a_good_custom_name_has_no_problem():
    assert traits.trait_problem("CUSTOM_CAP_BOOT_MODE_UEFI") is None


def test_valued_trait_only_for_values_one_name_tells_apart():
    assert names.valued_trait("CUSTOM_CAP_BOOT_MODE_", "uefi") == ("CUSTOM_CAP_BOOT_MODE_UEFI",
                                                                   None)
    trait, problem = names.valued_trait("CUSTOM_CAP_BOOT_MODE_", "UEFI")
    assert trait is None and "makes no trait" in problem
    # Folded (exact=False): the spelling becomes the trait it normalizes to.
    assert names.valued_trait("CUSTOM_VENDOR_", "Dell Inc.", exact=False) == (
        "CUSTOM_VENDOR_DELL_INC_", None)


def test_one_line_folds_and_cuts():
    assert names.one_line("a\n  b\tc") == "a b c"
    assert names.one_line("x" * 500, limit=10) == "xxxxxxx..."
