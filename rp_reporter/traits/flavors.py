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

"""Flavors: a flavor's capability specs as required traits, and what a flavor needs to
land on nodes of a class.  Pure.

``translate_flavor`` turns a flavor's capability specs into required traits, only
where the result selects exactly the nodes nova's filter passes (``nova_filter``
says which those are).
"""

import dataclasses

from rp_reporter.traits.names import valued_trait
from rp_reporter.traits.nova_filter import HOST_STATE_ATTRS
from rp_reporter.traits.nova_filter import OPS
from rp_reporter.traits.nova_filter import spec_scope


@dataclasses.dataclass(frozen=True)
class Translation:
    specs: dict                 # extra spec key -> value, to set on the flavor
    untranslated: tuple = ()    # (key, value, reason)
    translated: tuple = ()      # (key, value, trait): what each capability spec became

    @property
    def complete(self):
        return not self.untranslated


BAREMETAL_ZERO = ("resources:VCPU", "resources:MEMORY_MB", "resources:DISK_GB")


def flavor_extra_specs(resource_class):
    """What a nova flavor needs to land on nodes of this class (and nothing else)."""
    return " ".join([f"resources:{resource_class}=1"] + [f"{key}=0" for key in BAREMETAL_ZERO])


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
    if op in OPS:
        kind = "a number comparison" if op in ("=", "==", "!=", ">=", "<=") else (
            "a substring test" if op in ("<in>", "<all-in>") else "a string comparison")
        return None, f"{op!r} is {kind}, which no required trait expresses"
    return req, None


def translate_capability(rules, key, req):
    """(trait, None) for a spec the rules translate exactly, else (None, reason)."""
    scope = spec_scope(key)
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
    trait, problem = valued_trait(rule.prefix, value)
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
        scope = spec_scope(key)
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
