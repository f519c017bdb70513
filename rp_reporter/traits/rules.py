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

"""Capability rules: which capability keys and values, and which other node properties
(``cpu_arch``, ``vendor``, ``memory_mb``/``cpus``/``local_gb`` ranges), become which
trait names.

A rule file is YAML (``etc/rp_reporter/capability-rules.yaml`` is ``DEFAULT_RULES``
written out); ``rules_from_dict`` checks a parsed document and ``load_rules`` a file,
both raising ``RulesError`` in one line naming the place.  Pure, but for
``load_rules`` reading its one file.
"""

from __future__ import annotations

import dataclasses
import os

from rp_reporter.traits.names import CAP_PREFIX
from rp_reporter.traits.names import CUSTOM
from rp_reporter.traits.names import FOLDED_PROPERTIES
from rp_reporter.traits.names import normalize
from rp_reporter.traits.names import one_line
from rp_reporter.traits.names import trait_problem
from rp_reporter.traits.names import type_name
from rp_reporter.traits.names import valued_trait
from rp_reporter.traits.nova_filter import HOST_STATE_ATTRS

RULES_MAX_BYTES = 1024 * 1024   # a rule file larger than this is refused

# Properties whose value becomes a trait (CUSTOM_<PROPERTY>_<VALUE>), and those a range reads.
VALUE_PROPERTIES = ("cpu_arch", "vendor")
RANGE_PROPERTIES = ("memory_mb", "cpus", "local_gb")

# The capability keys the defaults turn into traits: the ones Ironic's drivers and
# inspection set, with small sets of values (see doc/source/admin/capabilities.md).
DEFAULT_CAPABILITY_KEYS = (
    "boot_mode",          # bios | uefi
    "boot_option",        # local | netboot | ramdisk
    "disk_label",         # msdos | gpt
    "secure_boot",        # true | false
    "trusted_boot",       # true | false
    "iscsi_boot",         # true | false
    "cpu_vt",             # true | false
    "cpu_aes",            # true | false
    "cpu_txt",            # true | false
    "cpu_hugepages",      # true | false
    "cpu_hugepages_1g",   # true | false
)


class RulesError(ValueError):
    """A bad rule file or document; ``str(e)`` is one line: ``<source>: <where>: <what>``."""

    def __init__(self, source, where, what):
        self.source, self.where, self.what = source, where, what
        super().__init__(one_line(f"{source}: {where}: {what}"))


@dataclasses.dataclass(frozen=True)
class ValueRule:
    """A capability key or a property whose values become ``<prefix><VALUE>``."""
    key: str
    prefix: str
    values: frozenset | None = None     # None: every value

    def allows(self, value):
        return self.values is None or value in self.values


@dataclasses.dataclass(frozen=True)
class RangeRule:
    """``trait`` when ``min <= int(property) <= max`` (either bound may be None)."""
    property: str
    trait: str
    min: int | None = None
    max: int | None = None

    def holds(self, value):
        return ((self.min is None or value >= self.min)
                and (self.max is None or value <= self.max))


@dataclasses.dataclass(frozen=True)
class Rules:
    capabilities: tuple = ()    # ValueRule per allowed capability key, sorted by key
    properties: tuple = ()      # ValueRule per property of VALUE_PROPERTIES
    ranges: tuple = ()          # RangeRule
    source: str = "<defaults>"

    def capability_rule(self, key):
        return next((r for r in self.capabilities if r.key == key), None)

    def property_rule(self, prop):
        return next((r for r in self.properties if r.key == prop), None)


DEFAULT_RULES = Rules(capabilities=tuple(
    ValueRule(key, CAP_PREFIX + normalize(key) + "_") for key in sorted(DEFAULT_CAPABILITY_KEYS)))

_TOP_KEYS = ("capabilities", "properties", "ranges")


def _values(source, where, spec):
    """``all`` -> None; a list of non-empty strings -> frozenset."""
    if spec == "all" or spec is None:
        return None
    if not isinstance(spec, list) or not spec:
        raise RulesError(source, where, f"want 'all' or a non-empty list of values, got "
                                        f"{type_name(spec)}")
    values = set()
    for i, v in enumerate(spec):
        if isinstance(v, bool):
            raise RulesError(source, f"{where}[{i}]", f"YAML read {v!r} as a boolean: quote it "
                                                      f"('{str(v).lower()}')")
        if not isinstance(v, (str, int, float)) or str(v) == "":
            raise RulesError(source, f"{where}[{i}]", f"want a non-empty string, got "
                                                      f"{type_name(v)} {v!r}")
        v = str(v)
        if "," in v or ":" in v:
            raise RulesError(source, f"{where}[{i}]", f"{v!r}: a capability value cannot hold "
                                                      "',' or ':'")
        values.add(v)
    return frozenset(values)


def _value_rule(source, where, key, spec, default_prefix):
    """One key's rule from ``all``, a list of values, or {values:, prefix:}."""
    prefix = default_prefix
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"values", "prefix"})
        if unknown:
            raise RulesError(source, where, f"unknown field {unknown[0]!r} (want values, prefix)")
        prefix = spec.get("prefix", default_prefix)
        if not isinstance(prefix, str) or not prefix.endswith("_"):
            raise RulesError(source, f"{where}.prefix", f"want a string ending in '_', got "
                                                        f"{prefix!r}")
        problem = trait_problem(prefix + "X")
        if problem:
            raise RulesError(source, f"{where}.prefix", problem.replace("'" + prefix + "X'",
                                                                        repr(prefix)))
        spec = spec.get("values", "all")
    values = _values(source, where, spec)
    rule = ValueRule(key, prefix, values)
    for v in sorted(values or ()):
        _, problem = valued_trait(prefix, v, exact=key not in FOLDED_PROPERTIES)
        if problem:
            raise RulesError(source, f"{where}: {v!r}", problem)
    return rule


def _key(source, where, key):
    if not isinstance(key, str) or not key.strip():
        raise RulesError(source, where, f"want a non-empty capability key, got {key!r}")
    if key != key.strip() or "," in key or ":" in key:
        raise RulesError(source, where, f"capability key {key!r} has spaces around it, ',' or "
                                        "':' (nova reads none of those)")
    if key == "cpu_arch":
        raise RulesError(source, where, "cpu_arch is a property rule: write it under "
                                        "properties (nova reads it from properties/cpu_arch)")
    if key in HOST_STATE_ATTRS:
        raise RulesError(source, where, f"nova's filter reads {key!r} from its host state, "
                                        "never from the node's capabilities")
    return key


def _capability_rules(source, spec):
    where = "capabilities"
    if isinstance(spec, list):
        spec = {_key(source, f"{where}[{i}]", k): "all" for i, k in enumerate(spec)}
    elif not isinstance(spec, dict):
        raise RulesError(source, where, f"want a list of keys or a mapping, got "
                                        f"{type_name(spec)}")
    rules = []
    for key, value in spec.items():
        _key(source, f"{where}.{key}", key)
        rules.append(_value_rule(source, f"{where}.{key}", key, value,
                                 CAP_PREFIX + normalize(key) + "_"))
    return tuple(sorted(rules, key=lambda r: r.key))


def _property_rules(source, spec):
    where = "properties"
    if not isinstance(spec, dict):
        raise RulesError(source, where, f"want a mapping, got {type_name(spec)}")
    rules = []
    for prop, value in spec.items():
        if prop not in VALUE_PROPERTIES:
            raise RulesError(source, f"{where}.{prop}", f"unknown property (want one of "
                                                        f"{', '.join(VALUE_PROPERTIES)}; "
                                                        f"{', '.join(RANGE_PROPERTIES)} go "
                                                        "under ranges)")
        rules.append(_value_rule(source, f"{where}.{prop}", prop, value,
                                 CUSTOM + normalize(prop) + "_"))
    return tuple(sorted(rules, key=lambda r: r.key))


def _bound(source, where, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RulesError(source, where, f"want a whole number >= 0, got {value!r}")
    return value


def _range_rules(source, spec):
    if not isinstance(spec, list):
        raise RulesError(source, "ranges", f"want a list, got {type_name(spec)}")
    rules = []
    for i, item in enumerate(spec):
        where = f"ranges[{i}]"
        if not isinstance(item, dict):
            raise RulesError(source, where, f"want a mapping, got {type_name(item)}")
        unknown = sorted(set(item) - {"property", "min", "max", "trait"})
        if unknown:
            raise RulesError(source, where, f"unknown field {unknown[0]!r} (want property, "
                                            "min, max, trait)")
        prop = item.get("property")
        if prop not in RANGE_PROPERTIES:
            raise RulesError(source, f"{where}.property", f"want one of "
                                                          f"{', '.join(RANGE_PROPERTIES)}, got "
                                                          f"{prop!r}")
        lo = _bound(source, f"{where}.min", item.get("min"))
        hi = _bound(source, f"{where}.max", item.get("max"))
        if lo is None and hi is None:
            raise RulesError(source, where, "give min, max or both")
        if lo is not None and hi is not None and lo > hi:
            raise RulesError(source, where, f"min {lo} is above max {hi}")
        trait = item.get("trait")
        problem = trait_problem(trait)
        if problem:
            raise RulesError(source, f"{where}.trait", problem)
        rules.append(RangeRule(prop, trait, lo, hi))
    return tuple(rules)


def rules_from_dict(doc, source="<rules>"):
    """Rules from a parsed document; RulesError (one line naming the place) if it is wrong.

    An empty document (or None) gives rules that derive nothing.
    """
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise RulesError(source, "top level", f"want a mapping, got {type_name(doc)}")
    unknown = sorted(str(k) for k in set(doc) - set(_TOP_KEYS))
    if unknown:
        raise RulesError(source, unknown[0], f"unknown section (want {', '.join(_TOP_KEYS)})")
    return Rules(
        capabilities=_capability_rules(source, doc.get("capabilities") or []),
        properties=_property_rules(source, doc.get("properties") or {}),
        ranges=_range_rules(source, doc.get("ranges") or []),
        source=source)


def load_rules(path):
    """Rules from a YAML file; RulesError when it is missing, unreadable, too large or wrong."""
    import yaml  # only here: the rest of the module needs no YAML

    source = str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > RULES_MAX_BYTES:
                raise RulesError(source, "file", f"{size} bytes; a rule file may be at most "
                                                 f"{RULES_MAX_BYTES}")
            data = f.read(RULES_MAX_BYTES + 1)
    except OSError as e:
        raise RulesError(source, "file", e.strerror or str(e)) from None
    if len(data) > RULES_MAX_BYTES:
        raise RulesError(source, "file", f"more than {RULES_MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RulesError(source, "file", f"not UTF-8 ({e.reason} at byte {e.start})") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        raise RulesError(source, where, f"bad YAML: {getattr(e, 'problem', None) or e}") \
            from None
    return rules_from_dict(doc, source)
