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

"""A node's derived traits, and what to change so it carries them.  Pure.

* ``derive_traits`` gives the traits the rules derive from a node's ``properties``,
  ``derive_problems`` what it skipped;
* ``trait_changes`` says what to add and remove, never removing a trait this tool
  did not add (the record of what it added lives in the node's ``extra``, under
  ``RECORD_KEY``; ``recorded_traits`` reads it).
"""

import dataclasses

from rp_reporter.traits.names import FOLDED_PROPERTIES
from rp_reporter.traits.names import one_line
from rp_reporter.traits.names import trait_problem
from rp_reporter.traits.names import type_name
from rp_reporter.traits.names import valued_trait
from rp_reporter.traits.nova_filter import host_stats
from rp_reporter.traits.nova_filter import node_properties
from rp_reporter.traits.nova_filter import parse_capabilities

# A node's extra key holding the sorted list of the traits this tool added to it.
RECORD_KEY = "rp_reporter_derived_traits"


def capability_trait(rules, key, value):
    """(trait, problem) for a node's capability ``key:value``: the trait the rules make
    of it, or why it makes none; (None, None) when no rule takes that value."""
    rule = rules.capability_rule(key)
    if rule is None or not rule.allows(value):
        return None, None
    return valued_trait(rule.prefix, value)


def _derive(rules, properties):
    """(traits, problems) for one node's properties."""
    props = node_properties(properties)
    traits, problems = set(), []
    if properties is not None and not isinstance(properties, dict):
        problems.append(f"properties is a {type_name(properties)}, not a mapping")
    raw = props.get("capabilities")
    if raw and not isinstance(raw, str):
        problems.append(f"capabilities is a {type_name(raw)}, not a string; read as nova "
                        "reads it (str())")
    caps, malformed = parse_capabilities(raw)
    for piece in malformed:
        problems.append(f"malformed capability {one_line(piece, 80)!r} (want key:value)")
    for key, value in sorted(caps.items()):
        trait, problem = capability_trait(rules, key, value)
        if problem:
            problems.append(f"capability {key}: {problem}")
        elif trait:
            traits.add(trait)
    stats = host_stats(props)
    for rule in rules.properties:
        value = stats.get("cpu_arch") if rule.key == "cpu_arch" else props.get(rule.key)
        if value is None or value == "":
            continue
        value = str(value)
        if not rule.allows(value):
            continue
        trait, problem = valued_trait(rule.prefix, value,
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
            problems.append(f"property {rule.property}: {one_line(value, 80)!r} is not a "
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


def trait_changes(current, recorded, derived, owned=frozenset()):
    """What to write so the node carries its derived traits.

    Adds what is derived and missing; removes only what this tool recorded as added
    and no longer derives.  A trait the node had before it was derived is never
    recorded as ours, so never removed; neither is a trait set by hand, unless it is
    ``owned``: a trait this tool alone decides (tenancy's public trait), removed when
    not derived however it got there, and never recorded for it.
    """
    current, recorded, derived = frozenset(current), frozenset(recorded), frozenset(derived)
    add = derived - current
    remove = ((recorded | frozenset(owned)) - derived) & current
    after = (current | add) - remove
    return TraitChanges(add=add, remove=remove,
                        recorded=(recorded & derived & after) | add, previous=recorded)
