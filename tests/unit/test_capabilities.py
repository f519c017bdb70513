"""Capabilities as traits: the pure core (parsing, rules, derivation, changes, flavors)."""

import pathlib

import hypothesis
import pytest
from hypothesis import strategies as st

from rp_reporter import capabilities as caps

REPO = pathlib.Path(__file__).resolve().parents[2]


# --- parsing, as nova's Ironic driver parses -------------------------------------------------

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
    assert caps.parse_capabilities(value) == (parsed, malformed)


def test_parse_survives_a_10kb_string():
    value = "boot_mode:uefi," + "x" * 10240
    parsed, malformed = caps.parse_capabilities(value)
    assert parsed == {"boot_mode": "uefi"} and len(malformed) == 1


@hypothesis.given(st.one_of(st.none(), st.text(max_size=300), st.integers(),
                            st.lists(st.text(max_size=5))))
def test_parse_and_derive_never_raise(value):
    parsed, malformed = caps.parse_capabilities(value)
    assert all(k == k.strip() for k in parsed)
    traits = caps.derive_traits(caps.DEFAULT_RULES, {"capabilities": value})
    assert all(caps.trait_problem(t) is None for t in traits)
    caps.derive_problems(caps.DEFAULT_RULES, {"capabilities": value})


# --- rules --------------------------------------------------------------------------------

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
    with pytest.raises(caps.RulesError) as e:
        caps.rules_from_dict(doc, source="r.yaml")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("r.yaml: ")
    assert where in message


def test_rules_are_hashable_and_defaults_cover_the_documented_keys():
    hash(caps.DEFAULT_RULES)
    assert {r.key for r in caps.DEFAULT_RULES.capabilities} >= {
        "boot_mode", "secure_boot", "boot_option", "disk_label", "iscsi_boot"}
    assert caps.rules_from_dict(None).capabilities == ()


def test_shipped_rule_file_loads_and_equals_the_defaults():
    rules = caps.load_rules(REPO / "etc/rp_reporter/capability-rules.yaml")
    assert rules.capabilities == caps.DEFAULT_RULES.capabilities
    assert rules.properties == () and rules.ranges == ()


@pytest.mark.parametrize("content, where", [
    (None, "No such file"),
    ("capabilities: [boot_mode\n", "line 2"),
    ("capabilities:\n  - boot_mode\n  -: [\n", "bad YAML"),
    (b"\xff\xfe", "not UTF-8"),
    ("x" * (caps.RULES_MAX_BYTES + 1), "at most"),
    ("just a string", "top level"),
])
def test_load_rules_refuses_bad_files_in_one_line(tmp_path, content, where):
    path = tmp_path / "rules.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    with pytest.raises(caps.RulesError) as e:
        caps.load_rules(path)
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
    rules = caps.load_rules(path)
    props = {"capabilities": "boot_mode:bios,raid_level:10,gpu:a100", "cpu_arch": "x86_64",
             "vendor": "supermicro", "memory_mb": "524288", "cpus": 64}
    assert caps.derive_traits(rules, props) == {
        "CUSTOM_CAP_RAID_LEVEL_10", "CUSTOM_GPU_A100", "CUSTOM_CPU_ARCH_X86_64",
        "CUSTOM_MEM_256G_PLUS"}
    props.update(capabilities="boot_mode:uefi", vendor="dell", cpus=8, memory_mb=1)
    assert caps.derive_traits(rules, props) == {
        "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CPU_ARCH_X86_64", "CUSTOM_VENDOR_DELL",
        "CUSTOM_CPUS_16_OR_FEWER"}


# --- derivation ------------------------------------------------------------------------------

def test_derive_defaults():
    props = {"capabilities": "boot_mode:uefi,secure_boot:true,profile:gold,a:b:c",
             "cpu_arch": "x86_64"}
    assert caps.derive_traits(caps.DEFAULT_RULES, props) == {
        "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CAP_SECURE_BOOT_TRUE"}
    problems = caps.derive_problems(caps.DEFAULT_RULES, props)
    assert problems == ["malformed capability 'a:b:c' (want key:value)"]


@pytest.mark.parametrize("properties", [None, "boot_mode:uefi", [], {"capabilities": None},
                                        {"capabilities": ""}, {"memory_mb": "lots"}])
def test_derive_odd_properties_gives_nothing(properties):
    assert caps.derive_traits(caps.DEFAULT_RULES, properties) == frozenset()


def test_derive_skips_a_value_too_long_for_a_trait_and_says_so():
    props = {"capabilities": "boot_mode:" + "u" * 10240 + ",secure_boot:true"}
    assert caps.derive_traits(caps.DEFAULT_RULES, props) == {"CUSTOM_CAP_SECURE_BOOT_TRUE"}
    (problem,) = caps.derive_problems(caps.DEFAULT_RULES, props)
    assert "boot_mode" in problem and "at most 255" in problem and len(problem) < 400


@pytest.mark.parametrize("value", [" uefi", "UEFI", "Uefi", "uefi-2", "1+0", "uéfi"])
def test_a_value_one_trait_name_would_merge_with_another_makes_no_trait(value):
    # nova's filter tells " uefi", "UEFI" and "uefi" apart; a trait name could not
    # ("UEFI" and "uefi" both upper() to UEFI; "1+0" and "1_0" both normalize to 1_0).
    props = {"capabilities": f"boot_mode:{value},secure_boot:true"}
    assert caps.derive_traits(caps.DEFAULT_RULES, props) == {"CUSTOM_CAP_SECURE_BOOT_TRUE"}
    (problem,) = caps.derive_problems(caps.DEFAULT_RULES, props)
    assert problem.startswith("capability boot_mode:") and "makes no trait" in problem
    t = caps.translate_flavor(caps.DEFAULT_RULES, {"capabilities:boot_mode": value,
                                                   "resources:CUSTOM_X": "1"})
    assert [k for k, _, _ in t.untranslated] == ["capabilities:boot_mode"]
    assert not any(k.startswith("trait:") for k in t.specs)


def test_a_rule_listing_a_value_that_makes_no_exact_trait_is_refused():
    with pytest.raises(caps.RulesError, match="makes no trait"):
        caps.rules_from_dict({"capabilities": {"boot_mode": ["UEFI"]}})
    # vendor is no flavor's spec: its spellings may fold into one trait.
    rules = caps.rules_from_dict({"properties": {"vendor": ["Dell"]}})
    assert caps.derive_traits(rules, {"vendor": "Dell"}) == {"CUSTOM_VENDOR_DELL"}


def test_a_capability_named_cpu_arch_wins_as_in_nova():
    rules = caps.rules_from_dict({"properties": {"cpu_arch": "all"}})
    assert caps.derive_traits(rules, {"cpu_arch": "x86_64",
                                      "capabilities": "cpu_arch:aarch64"}) == {
        "CUSTOM_CPU_ARCH_AARCH64"}


# --- changes -----------------------------------------------------------------------------------

def test_trait_changes_adds_and_records():
    c = caps.trait_changes(current={"CUSTOM_HAND"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_UEFI"})
    assert c.add == {"CUSTOM_CAP_BOOT_MODE_UEFI"} and c.remove == frozenset()
    assert c.recorded == {"CUSTOM_CAP_BOOT_MODE_UEFI"} and c.changed


def test_a_trait_present_before_it_was_derived_is_never_claimed_nor_removed():
    c = caps.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_UEFI"})
    assert not c.changed and c.recorded == frozenset()
    c = caps.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI"}, recorded=set(),
                           derived={"CUSTOM_CAP_BOOT_MODE_BIOS"})
    assert c.remove == frozenset() and c.add == {"CUSTOM_CAP_BOOT_MODE_BIOS"}


def test_a_changed_capability_swaps_only_our_trait():
    c = caps.trait_changes(current={"CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_HAND"},
                           recorded={"CUSTOM_CAP_BOOT_MODE_UEFI"},
                           derived={"CUSTOM_CAP_BOOT_MODE_BIOS"})
    assert c.add == {"CUSTOM_CAP_BOOT_MODE_BIOS"}
    assert c.remove == {"CUSTOM_CAP_BOOT_MODE_UEFI"}
    assert c.recorded == {"CUSTOM_CAP_BOOT_MODE_BIOS"}


def test_a_recorded_trait_removed_by_hand_leaves_the_record():
    c = caps.trait_changes(current=set(), recorded={"CUSTOM_A"}, derived=set())
    assert c.remove == frozenset() and c.recorded == frozenset() and c.changed


_traits = st.frozensets(st.sampled_from(["CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "CUSTOM_D"]))


@hypothesis.given(_traits, _traits, _traits, _traits)
def test_trait_changes_properties(hand, recorded, derived, derived2):
    # The node carries hand-set traits (never recorded) and what we recorded.
    current = hand | recorded
    recorded = recorded - hand
    c = caps.trait_changes(current, recorded, derived)
    after = (current | c.add) - c.remove
    assert derived <= after                          # everything derived is there
    assert not (c.remove & hand)                     # a hand-set trait is never removed
    assert c.remove <= recorded                      # only what we recorded goes
    assert c.recorded <= after and not (c.recorded & (hand - recorded))
    again = caps.trait_changes(after, c.recorded, derived)
    assert not again.changed                         # a second run changes nothing
    # The capability changes: the hand-set ones still stay.
    c2 = caps.trait_changes(after, c.recorded, derived2)
    assert not (c2.remove & hand)


def test_recorded_traits_reads_only_a_list_of_valid_names():
    assert caps.recorded_traits({caps.RECORD_KEY: ["CUSTOM_A", "bad", 3]}) == {"CUSTOM_A"}
    assert caps.recorded_traits({caps.RECORD_KEY: "CUSTOM_A"}) == frozenset()
    assert caps.recorded_traits(None) == frozenset()


# --- flavors ------------------------------------------------------------------------------------

def test_translate_a_typical_flavor():
    t = caps.translate_flavor(caps.DEFAULT_RULES, {
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
    t = caps.translate_flavor(caps.DEFAULT_RULES, {key: value,
                                                   "resources:CUSTOM_GOLD": "1"})
    ((k, v, why),) = t.untranslated
    assert (k, v) == (key, value) and reason in why
    assert not any(s.startswith("trait:") for s in t.specs)


def test_translate_cpu_arch_with_a_property_rule_and_the_resource_class():
    rules = caps.rules_from_dict({"properties": {"cpu_arch": "all"}})
    t = caps.translate_flavor(rules, {"cpu_arch": "x86_64"}, resource_class="CUSTOM_GOLD")
    assert t.complete and t.specs["trait:CUSTOM_CPU_ARCH_X86_64"] == "required"
    assert t.specs["resources:CUSTOM_GOLD"] == "1"
    t = caps.translate_flavor(rules, {"cpu_arch": "x86_64"})
    assert [u[0] for u in t.untranslated] == ["resources:CUSTOM_*"]


@pytest.mark.parametrize("value, req, want", [
    ("uefi", "uefi", True), ("uefi", "bios", False), ("uefi", "s== uefi", True),
    ("uefi", "<or> bios <or> uefi", True), ("uefi", "<in> ef", True), ("8", ">= 4", True),
    ("x", ">= 4", False), ("uefi", "<or>", False), ("uefi", "s==", False),
    ("a b", "a b", True),
])
def test_match_spec_as_nova(value, req, want):
    assert caps.match_spec(value, req) is want


def test_capabilities_match():
    props = {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}
    assert caps.capabilities_match({"capabilities:boot_mode": "uefi"}, props)
    assert not caps.capabilities_match({"capabilities:boot_mode": "bios"}, props)
    assert not caps.capabilities_match({"capabilities:secure_boot": "true"}, props)
    assert caps.capabilities_match({"secure_boot": "true"}, props)     # unscoped, absent
    assert not caps.capabilities_match({"boot_mode": "bios"}, props)   # unscoped, present
    assert caps.capabilities_match({"cpu_arch": "x86_64", "hw:x": "1",
                                    "resources:VCPU": "0"}, props)
    assert not caps.capabilities_match({"cpu_arch": "x86_64"}, {})
    assert not caps.capabilities_match({"capabilities:boot_mode:x": "1"}, props)


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
    rules = caps.rules_from_dict({"capabilities": ["boot_mode", "secure_boot"]})
    t = caps.translate_flavor(rules, dict(specs, **{"resources:CUSTOM_X": "1"}))
    hypothesis.assume(t.complete)
    props = {"capabilities": ",".join(f"{k}:{v}" for k, v in node_caps.items())}
    traits = caps.derive_traits(rules, props)
    required = {k[len("trait:"):] for k, v in t.specs.items() if v == "required"}
    assert (required <= traits) == caps.capabilities_match(specs, props)
