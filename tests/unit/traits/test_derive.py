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

"""rp_reporter.traits.derive: a node's derived traits, and the changes that never touch
a trait this tool did not add."""

import hypothesis
import pytest
from hypothesis import strategies as st

from rp_reporter import traits


@hypothesis.given(st.one_of(st.none(), st.text(max_size=300), st.integers(),
                            st.lists(st.text(max_size=5))))
def test_parse_and_derive_never_raise(value):
    parsed, malformed = traits.parse_capabilities(value)
    assert all(k == k.strip() for k in parsed)
    derived = traits.derive_traits(traits.DEFAULT_RULES, {"capabilities": value})
    assert all(traits.trait_problem(t) is None for t in derived)
    traits.derive_problems(traits.DEFAULT_RULES, {"capabilities": value})


def test_derive_defaults():
    props = {"capabilities": "boot_mode:uefi,secure_boot:true,profile:gold,a:b:c",
             "cpu_arch": "x86_64"}
    assert traits.derive_traits(traits.DEFAULT_RULES, props) == {
        "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CAP_SECURE_BOOT_TRUE"}
    problems = traits.derive_problems(traits.DEFAULT_RULES, props)
    assert problems == ["malformed capability 'a:b:c' (want key:value)"]


@pytest.mark.parametrize("properties", [None, "boot_mode:uefi", [], {"capabilities": None},
                                        {"capabilities": ""}, {"memory_mb": "lots"}])
def test_derive_odd_properties_gives_nothing(properties):
    assert traits.derive_traits(traits.DEFAULT_RULES, properties) == frozenset()


def test_derive_skips_a_value_too_long_for_a_trait_and_says_so():
    props = {"capabilities": "boot_mode:" + "u" * 10240 + ",secure_boot:true"}
    assert traits.derive_traits(traits.DEFAULT_RULES, props) == {"CUSTOM_CAP_SECURE_BOOT_TRUE"}
    (problem,) = traits.derive_problems(traits.DEFAULT_RULES, props)
    assert "boot_mode" in problem and "at most 255" in problem and len(problem) < 400


@pytest.mark.parametrize("value", [" uefi", "UEFI", "Uefi", "uefi-2", "1+0", "uéfi"])
def test_a_value_one_trait_name_would_merge_with_another_makes_no_trait(value):
    # nova's filter tells " uefi", "UEFI" and "uefi" apart; a trait name could not
    # ("UEFI" and "uefi" both upper() to UEFI; "1+0" and "1_0" both normalize to 1_0).
    props = {"capabilities": f"boot_mode:{value},secure_boot:true"}
    assert traits.derive_traits(traits.DEFAULT_RULES, props) == {"CUSTOM_CAP_SECURE_BOOT_TRUE"}
    (problem,) = traits.derive_problems(traits.DEFAULT_RULES, props)
    assert problem.startswith("capability boot_mode:") and "makes no trait" in problem
    t = traits.translate_flavor(traits.DEFAULT_RULES, {"capabilities:boot_mode": value,
                                                   "resources:CUSTOM_X": "1"})
    assert [k for k, _, _ in t.untranslated] == ["capabilities:boot_mode"]
    assert not any(k.startswith("trait:") for k in t.specs)


def test_a_capability_named_cpu_arch_wins_as_in_nova():
    rules = traits.rules_from_dict({"properties": {"cpu_arch": "all"}})
    assert traits.derive_traits(rules, {"cpu_arch": "x86_64",
                                      "capabilities": "cpu_arch:aarch64"}) == {
        "CUSTOM_CPU_ARCH_AARCH64"}


def test_trait_changes_adds_and_records():
    c = traits.trait_changes(current={"CUSTOM_HAND"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_UEFI"})
    assert c.add == {"CUSTOM_CAP_BOOT_MODE_UEFI"} and c.remove == frozenset()
    assert c.recorded == {"CUSTOM_CAP_BOOT_MODE_UEFI"} and c.changed


def test_a_trait_present_before_it_was_derived_is_never_claimed_nor_removed():
    c = traits.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_UEFI"})
    assert not c.changed and c.recorded == frozenset()
    c = traits.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_BIOS"})
    assert c.remove == frozenset() and c.add == {"CUSTOM_CAP_BOOT_MODE_BIOS"}


def test_a_changed_capability_swaps_only_our_trait():
    c = traits.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_HAND"},
                           recorded={"CUSTOM_CAP_BOOT_MODE_UEFI"},
                           derived={"CUSTOM_CAP_BOOT_MODE_BIOS"})
    assert c.add == {"CUSTOM_CAP_BOOT_MODE_BIOS"}
    assert c.remove == {"CUSTOM_CAP_BOOT_MODE_UEFI"}
    assert c.recorded == {"CUSTOM_CAP_BOOT_MODE_BIOS"}


def test_a_recorded_trait_removed_by_hand_leaves_the_record():
    c = traits.trait_changes(current=set(), recorded={"CUSTOM_A"}, derived=set())
    assert c.remove == frozenset() and c.recorded == frozenset() and c.changed


def test_an_owned_trait_is_removed_when_not_derived_and_never_recorded_for_it():
    hand_set = traits.trait_changes(current={"CUSTOM_PUBLIC", "CUSTOM_HAND"}, recorded=set(),
                                    derived=set(), owned={"CUSTOM_PUBLIC"})
    assert hand_set.remove == {"CUSTOM_PUBLIC"} and hand_set.recorded == frozenset()
    # Once gone, nothing more to write: no record churns on the next look.
    again = traits.trait_changes(current={"CUSTOM_HAND"}, recorded=set(), derived=set(),
                                 owned={"CUSTOM_PUBLIC"})
    assert not again.changed
    derived = traits.trait_changes(current=set(), recorded=set(), derived={"CUSTOM_PUBLIC"},
                                   owned={"CUSTOM_PUBLIC"})
    assert derived.add == {"CUSTOM_PUBLIC"} and derived.recorded == {"CUSTOM_PUBLIC"}


_traits = st.frozensets(st.sampled_from(["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "CUSTOM_D"]))


@hypothesis.given(_traits, _traits, _traits, _traits)
def test_trait_changes_properties(hand, recorded, derived, derived2):
    # The node carries hand-set traits (never recorded) and what we recorded.
    current = hand | recorded
    recorded = recorded - hand
    c = traits.trait_changes(current, recorded, derived)
    after = (current | c.add) - c.remove
    assert derived <= after                          # everything derived is there
    assert not (c.remove & hand)                     # a hand-set trait is never removed
    assert c.remove <= recorded                      # only what we recorded goes
    assert c.recorded <= after and not (c.recorded & (hand - recorded))
    again = traits.trait_changes(after, c.recorded, derived)
    assert not again.changed                         # a second run changes nothing
    # The capability changes: the hand-set ones still stay.
    c2 = traits.trait_changes(after, c.recorded, derived2)
    assert not (c2.remove & hand)


def test_recorded_traits_reads_only_a_list_of_valid_names():
    assert traits.recorded_traits({traits.RECORD_KEY: ["CUSTOM_A", "bad", 3]}) == {"CUSTOM_A"}
    assert traits.recorded_traits({traits.RECORD_KEY: "CUSTOM_A"}) == frozenset()
    assert traits.recorded_traits(None) == frozenset()


def test_capability_trait_is_the_trait_derive_gives_for_one_capability():
    rules = traits.rules_from_dict({"capabilities": {"boot_mode": ["uefi"], "raid": "all"}})
    assert traits.capability_trait(rules, "boot_mode", "uefi") == (
        "CUSTOM_CAP_BOOT_MODE_UEFI", None)
    assert traits.capability_trait(rules, "boot_mode", "bios") == (None, None)   # not listed
    assert traits.capability_trait(rules, "profile", "gold") == (None, None)     # no rule
    trait, problem = traits.capability_trait(rules, "raid", "1+0")
    assert trait is None and "makes no trait" in problem
