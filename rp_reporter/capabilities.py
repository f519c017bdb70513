"""Node capabilities and properties as traits; flavors' capability specs as trait specs.

Operators match flavors to hardware with nova's ``ComputeCapabilitiesFilter``
(``capabilities:boot_mode=uefi`` in a flavor against ``properties/capabilities``
on the Ironic node, ``"boot_mode:uefi,secure_boot:true"``).  Placement does the
same match with traits, if the node carries them.  This module is the pure core:

* a rule file (YAML) says which capability keys and values, and which other node
  properties (``cpu_arch``, ``vendor``, ``memory_mb``/``cpus``/``local_gb`` ranges),
  become which trait names (``rules_from_dict``, ``load_rules``, ``DEFAULT_RULES``);
* ``parse_capabilities`` reads the capability string exactly as nova's Ironic driver
  does (``nova/virt/ironic/driver.py``, ``_node_resource``);
* ``derive_traits`` gives a node's derived traits, ``derive_problems`` what it skipped;
* ``trait_changes`` says what to add and remove, never removing a trait this tool
  did not add (the record of what it added lives in the node's ``extra``);
* ``translate_flavor`` turns a flavor's capability specs into required traits, only
  where the result selects exactly the nodes nova's filter passes; ``capabilities_match``
  is our reading of that filter on one node (``nova/scheduler/filters/
  compute_capabilities_filter.py`` with ``extra_specs_ops.match``).

Nothing here does I/O except ``load_rules`` reading its one file.
"""

import dataclasses
import operator
import os
import re

import os_traits

from rp_reporter import model

# A node's extra key holding the sorted list of the traits this tool added to it.
RECORD_KEY = "rp_reporter_derived_traits"

CUSTOM = os_traits.CUSTOM_NAMESPACE
CAP_PREFIX = "CUSTOM_CAP_"
RULES_MAX_BYTES = 1024 * 1024   # a rule file larger than this is refused

# Properties whose value becomes a trait (CUSTOM_<PROPERTY>_<VALUE>), and those a range reads.
VALUE_PROPERTIES = ("cpu_arch", "vendor")
RANGE_PROPERTIES = ("memory_mb", "cpus", "local_gb")

# The capability keys the defaults turn into traits: the ones Ironic's drivers and
# inspection set, with small sets of values (see doc/operator-guide.md).
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

# nova's HostState attributes: a spec naming one of them is read from the attribute, not
# from the node's capabilities (nova/scheduler/host_manager.py), so no trait stands for it.
HOST_STATE_ATTRS = frozenset((
    "aggregates", "allocation_candidates", "cell_uuid", "cpu_allocation_ratio", "cpu_info",
    "disk_allocation_ratio", "disk_mb_used", "failed_builds", "free_disk_mb", "free_ram_mb",
    "host", "host_ip", "hypervisor_hostname", "hypervisor_type", "hypervisor_version",
    "instances", "limits", "metrics", "nodename", "num_instances", "num_io_ops",
    "numa_topology", "pci_stats", "ram_allocation_ratio", "supported_instances",
    "total_usable_disk_gb", "total_usable_ram_mb", "updated", "uuid", "vcpus_total",
    "vcpus_used"))

# The filter's operators (nova/scheduler/filters/extra_specs_ops.py).
_OPS = {
    "=": lambda x, y: float(x) >= float(y),
    "<in>": lambda x, y: y in x,
    "<all-in>": lambda x, y: all(val in x for val in y),
    "==": lambda x, y: float(x) == float(y),
    "!=": lambda x, y: float(x) != float(y),
    ">=": lambda x, y: float(x) >= float(y),
    "<=": lambda x, y: float(x) <= float(y),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


class RulesError(ValueError):
    """A bad rule file or document; ``str(e)`` is one line: ``<source>: <where>: <what>``."""

    def __init__(self, source, where, what):
        self.source, self.where, self.what = source, where, what
        super().__init__(_one_line(f"{source}: {where}: {what}"))


def _one_line(text, limit=400):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --- names -----------------------------------------------------------------------------

def normalize(text):
    """Upper case; each character outside A-Z, 0-9 and ``_`` becomes one ``_``."""
    return re.sub(r"[^A-Z0-9_]", "_", str(text).upper())


def trait_problem(name):
    """Why Placement (and Ironic) would refuse this custom trait name, or None."""
    if not isinstance(name, str) or not name:
        return "trait name is empty"
    if len(name) > model.NAME_MAX:
        return f"trait name is {len(name)} characters; Placement takes at most {model.NAME_MAX}"
    if not model.NAME_RE.match(name):
        return f"trait name {name!r} is not ^[A-Z0-9_]+$"
    if not name.startswith(CUSTOM) or name == CUSTOM:
        return f"trait name {name!r} does not start with CUSTOM_ (and something after it)"
    if name.startswith(model.OWN_PREFIX):
        return f"trait name {name!r} is in rp_reporter's own namespace {model.OWN_PREFIX}*"
    return None


# Values that make a trait where nova's filter compares them (capabilities, cpu_arch):
# exactly the spellings upper() maps one to one onto trait names.  'UEFI' and 'uefi',
# or 'gpt-x' and 'gpt_x', are two values to nova but would be one trait, and a
# translated flavor would then pick nodes nova's filter does not.
EXACT_VALUE_RE = re.compile(r"^[a-z0-9_]+$")
# Property values no flavor spec is translated against: folding their spellings
# into one trait cannot make Placement pick what nova would not.
FOLDED_PROPERTIES = ("vendor",)


def _valued_trait(prefix, value, exact=True):
    """(trait, problem): the trait for a value under a prefix, or why there is none."""
    if exact and not EXACT_VALUE_RE.match(value):
        return None, (f"{_one_line(value, 80)!r} makes no trait: only values of a-z, 0-9 and _ "
                      "do (nova's filter tells spellings apart that one trait name would merge)")
    name = prefix + normalize(value)
    problem = trait_problem(name)
    return (None, problem) if problem else (name, None)


# --- rules -------------------------------------------------------------------------------

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


def _type_name(value):
    return "null" if value is None else type(value).__name__


def _values(source, where, spec):
    """``all`` -> None; a list of non-empty strings -> frozenset."""
    if spec == "all" or spec is None:
        return None
    if not isinstance(spec, list) or not spec:
        raise RulesError(source, where, f"want 'all' or a non-empty list of values, got "
                                        f"{_type_name(spec)}")
    values = set()
    for i, v in enumerate(spec):
        if isinstance(v, bool):
            raise RulesError(source, f"{where}[{i}]", f"YAML read {v!r} as a boolean: quote it "
                                                      f"('{str(v).lower()}')")
        if not isinstance(v, (str, int, float)) or str(v) == "":
            raise RulesError(source, f"{where}[{i}]", f"want a non-empty string, got "
                                                      f"{_type_name(v)} {v!r}")
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
        _, problem = _valued_trait(prefix, v, exact=key not in FOLDED_PROPERTIES)
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
                                        f"{_type_name(spec)}")
    rules = []
    for key, value in spec.items():
        _key(source, f"{where}.{key}", key)
        rules.append(_value_rule(source, f"{where}.{key}", key, value,
                                 CAP_PREFIX + normalize(key) + "_"))
    return tuple(sorted(rules, key=lambda r: r.key))


def _property_rules(source, spec):
    where = "properties"
    if not isinstance(spec, dict):
        raise RulesError(source, where, f"want a mapping, got {_type_name(spec)}")
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
        raise RulesError(source, "ranges", f"want a list, got {_type_name(spec)}")
    rules = []
    for i, item in enumerate(spec):
        where = f"ranges[{i}]"
        if not isinstance(item, dict):
            raise RulesError(source, where, f"want a mapping, got {_type_name(item)}")
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
        raise RulesError(source, "top level", f"want a mapping, got {_type_name(doc)}")
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


# --- reading nodes -------------------------------------------------------------------------

def parse_capabilities(value):
    """(key -> value, malformed pieces), as nova's Ironic driver reads ``capabilities``.

    Nova: ``str(value).split(',')``; each piece must split on ``:`` into exactly two
    non-empty parts, the key is stripped (the value is not), a later key wins; any
    other piece is malformed and skipped.  A false value (None, "", {}) is no
    capabilities.  Nova stringifies anything else, and so do we.
    """
    caps, malformed = {}, []
    if not value:
        return caps, malformed
    for piece in str(value).split(","):
        parts = piece.split(":")
        if len(parts) == 2 and parts[0] and parts[1]:
            caps[parts[0].strip()] = parts[1]
        else:
            malformed.append(piece)
    return caps, malformed


def _properties(properties):
    return properties if isinstance(properties, dict) else {}


def host_stats(properties):
    """What nova's filter sees of an Ironic node: ``cpu_arch`` from the properties,
    then every capability (a capability named cpu_arch wins, as in nova)."""
    props = _properties(properties)
    stats = {"cpu_arch": props.get("cpu_arch")}
    stats.update(parse_capabilities(props.get("capabilities"))[0])
    return stats


def _derive(rules, properties):
    """(traits, problems) for one node's properties."""
    props = _properties(properties)
    traits, problems = set(), []
    if properties is not None and not isinstance(properties, dict):
        problems.append(f"properties is a {_type_name(properties)}, not a mapping")
    raw = props.get("capabilities")
    if raw and not isinstance(raw, str):
        problems.append(f"capabilities is a {_type_name(raw)}, not a string; read as nova "
                        "reads it (str())")
    caps, malformed = parse_capabilities(raw)
    for piece in malformed:
        problems.append(f"malformed capability {_one_line(piece, 80)!r} (want key:value)")
    for key, value in sorted(caps.items()):
        rule = rules.capability_rule(key)
        if rule is None or not rule.allows(value):
            continue
        trait, problem = _valued_trait(rule.prefix, value)
        if problem:
            problems.append(f"capability {key}: {problem}")
        else:
            traits.add(trait)
    stats = host_stats(props)
    for rule in rules.properties:
        value = stats.get("cpu_arch") if rule.key == "cpu_arch" else props.get(rule.key)
        if value is None or value == "":
            continue
        value = str(value)
        if not rule.allows(value):
            continue
        trait, problem = _valued_trait(rule.prefix, value,
                                       exact=rule.key not in FOLDED_PROPERTIES)
        if problem:
            problems.append(f"property {rule.key}: {problem}")
        else:
            traits.add(trait)
    for rule in rules.ranges:
        value = props.get(rule.property)
        if value is None:
            continue
        try:  # nova's reading: int(); a bool or fraction is as nova reads it
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            problems.append(f"property {rule.property}: {_one_line(value, 80)!r} is not a "
                            "whole number")
            continue
        if rule.holds(number):
            traits.add(rule.trait)
    return frozenset(traits), problems


def derive_traits(rules, properties):
    """The traits the rules derive from an Ironic node's ``properties`` (any value)."""
    return _derive(rules, properties)[0]


def derive_problems(rules, properties):
    """One line per thing ``derive_traits`` skipped on this node (malformed capability
    pieces, values that make no valid trait name, odd numbers)."""
    return _derive(rules, properties)[1]


def recorded_traits(extra):
    """The traits a node's ``extra`` records as derived by this tool (anything odd: none)."""
    value = extra.get(RECORD_KEY) if isinstance(extra, dict) else None
    if not isinstance(value, list):
        return frozenset()
    return frozenset(t for t in value if isinstance(t, str) and trait_problem(t) is None)


# --- what to change ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class TraitChanges:
    add: frozenset = frozenset()
    remove: frozenset = frozenset()
    recorded: frozenset = frozenset()        # the record after the changes
    previous: frozenset = frozenset()        # the record before them

    @property
    def changed(self):
        return bool(self.add or self.remove or self.recorded != self.previous)


def trait_changes(current, recorded, derived):
    """What to write so the node carries its derived traits.

    Adds what is derived and missing; removes only what this tool recorded as added
    and no longer derives.  A trait the node had before it was derived is never
    recorded as ours, so never removed; neither is a trait set by hand.
    """
    current, recorded, derived = frozenset(current), frozenset(recorded), frozenset(derived)
    add = derived - current
    remove = (recorded - derived) & current
    after = (current | add) - remove
    return TraitChanges(add=add, remove=remove,
                        recorded=(recorded & derived & after) | add, previous=recorded)


# --- flavors ---------------------------------------------------------------------------------

def match_spec(value, req):
    """nova's ``extra_specs_ops.match(value, req)``; where nova would raise (a bare
    ``<or>``, a number that is not one), no match."""
    words = req.split()
    op = method = None
    if words:
        op = words.pop(0)
        method = _OPS.get(op)
    if op != "<or>" and not method:
        return value == req
    if value is None:
        return False
    try:
        if op == "<or>":
            while True:
                if words.pop(0) == value:
                    return True
                if not words:
                    break
                words.pop(0)
                if not words:
                    break
            return False
        if words:
            if op == "<all-in>":
                return method(value, words)
            return method(value, words[0])
    except (IndexError, ValueError, TypeError, OverflowError):
        return False
    return False


def _scope(key):
    """The filter's reading of a spec key: None (ignored), or the capability key path."""
    scope = key.split(":")
    if len(scope) == 1:
        return scope
    return scope[1:] if scope[0] == "capabilities" else None


def capabilities_match(extra_specs, properties):
    """Whether nova's ComputeCapabilitiesFilter passes this Ironic node for these specs.

    The node's host state is what nova's Ironic driver reports: ``cpu_arch`` and the
    parsed capabilities.  Unscoped keys count only where the node has them; keys
    deeper than ``capabilities:<key>`` and ``hw:maxphysaddr_bits`` never match an
    Ironic node (its cpu_info is None and no capability value is JSON with keys).
    HostState attributes (``host``, ``free_ram_mb``, ...) are not modelled.
    """
    stats = host_stats(properties)
    for key, req in (extra_specs or {}).items():
        if key == "hw:maxphysaddr_bits":
            return False
        scope = _scope(key)
        if scope is None:
            continue
        if len(scope) == 1 and ":" not in key and scope[0] not in stats:
            continue
        if len(scope) != 1:
            return False
        cap = stats.get(scope[0])
        if cap is None or not match_spec(str(cap), str(req)):
            return False
    return True


@dataclasses.dataclass(frozen=True)
class Translation:
    specs: dict                 # extra spec key -> value, to set on the flavor
    untranslated: tuple = ()    # (key, value, reason)
    translated: tuple = ()      # (key, value, trait): what each capability spec became

    @property
    def complete(self):
        return not self.untranslated


BAREMETAL_ZERO = ("resources:VCPU", "resources:MEMORY_MB", "resources:DISK_GB")


def _equality(req):
    """The one value ``req`` asks equality with, or (None, reason)."""
    words = req.split()
    op = words[0] if words else None
    if op == "s==":
        if len(words) < 2:
            return None, "'s==' with no value matches no node"
        return words[1], None
    if op == "<or>":
        return None, "'<or>' asks for any of several values; a flavor's required traits " \
                     "are all-of"
    if op in _OPS:
        kind = "a number comparison" if op in ("=", "==", "!=", ">=", "<=") else (
            "a substring test" if op in ("<in>", "<all-in>") else "a string comparison")
        return None, f"{op!r} is {kind}, which no required trait expresses"
    return req, None


def translate_capability(rules, key, req):
    """(trait, None) for a spec the rules translate exactly, else (None, reason)."""
    scope = _scope(key)
    if len(scope) != 1:
        return None, "a nested capability key never matches an Ironic node in nova's filter"
    name = scope[0]
    if ":" not in key and name != "cpu_arch":
        return None, ("unscoped: nova's filter reads it only on nodes that have it, which no "
                      f"required trait expresses; write capabilities:{name}")
    if name in HOST_STATE_ATTRS:
        return None, f"nova's filter reads {name!r} from its host state, not from the node"
    value, reason = _equality(str(req))
    if reason:
        return None, reason
    if not value:
        return None, "an empty value matches no node"
    if "," in value or ":" in value:
        return None, "no node's capability value can hold ',' or ':'"
    rule = rules.property_rule("cpu_arch") if name == "cpu_arch" else rules.capability_rule(name)
    if rule is None:
        return None, f"no rule derives a trait from {name!r} (add it to the rule file)"
    if not rule.allows(value):
        return None, f"the rule for {name!r} does not derive a trait for {value!r}"
    trait, problem = _valued_trait(rule.prefix, value)
    if problem:
        return None, problem
    return trait, None


def translate_flavor(rules, extra_specs, resource_class=None):
    """The trait and resource specs that select what the flavor's capability specs select.

    A spec the ComputeCapabilitiesFilter reads (``capabilities:<key>``, and unscoped
    keys) becomes ``trait:<T>=required`` only when it asks plain equality (a bare value,
    or ``s== v``) with a value the rules turn into ``T``: then Placement and the
    filter pick the same nodes.  Anything else (``<or>``, ``<in>``, numeric and
    ordering operators, nested or unscoped keys, keys no rule covers) is listed in
    ``untranslated`` with the reason.  Other specs (``resources:``, ``trait:``, ``hw:``,
    ...) are kept as they are; ``resources:VCPU/MEMORY_MB/DISK_GB=0`` are added when
    missing, and ``resources:CUSTOM_<resource_class>=1`` when given and missing.
    """
    specs, untranslated, translated = {}, [], []
    for key, value in (extra_specs or {}).items():
        key, value = str(key), "" if value is None else str(value)
        if key == "hw:maxphysaddr_bits":
            untranslated.append((key, value, "an Ironic node has no cpu_info: nova's filter "
                                             "passes no node"))
            continue
        scope = _scope(key)
        if scope is None:
            specs[key] = value
            continue
        trait, reason = translate_capability(rules, key, value)
        if reason:
            untranslated.append((key, value, reason))
        else:
            translated.append((key, value, trait))
            specs[f"trait:{trait}"] = "required"
    if resource_class:
        specs.setdefault(f"resources:{resource_class}", "1")
    for zero in BAREMETAL_ZERO:
        specs.setdefault(zero, "0")
    if not any(k.startswith("resources:CUSTOM_") for k in specs):
        untranslated.append(("resources:CUSTOM_*", "", "the flavor asks for no custom resource "
                                                       "class; name the nodes' class"))
    return Translation(specs=dict(sorted(specs.items())), untranslated=tuple(untranslated),
                       translated=tuple(translated))
