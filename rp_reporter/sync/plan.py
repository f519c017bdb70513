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

"""desired + observed -> the Placement writes that make them equal.  Pure.

The executor applies the operations in order, each carrying the provider
generation; on a conflict it re-observes and calls ``plan`` again.
"""

from __future__ import annotations

import dataclasses

from rp_reporter import model
from rp_reporter import tenancy


@dataclasses.dataclass(frozen=True, **model.SLOTS)
class Observed:
    """What Placement holds for one provider, as of ``generation``.

    ``usages`` (class -> units consumed) is None when not read: allocation
    deletes do not bump the generation, so usages are never cached and are
    read only when a decision depends on them (see ``needs_usages``).
    """

    uuid: str
    generation: int
    inventories: dict
    traits: frozenset
    usages: dict | None = None
    aggregates: frozenset | None = None  # None: not read (tenancy off, nothing to decide)

    def with_usages(self, usages):
        return dataclasses.replace(self, usages=usages)


@dataclasses.dataclass(frozen=True)
class CreateProvider:
    uuid: str
    name: str
    kind = "create"


@dataclasses.dataclass(frozen=True)
class SetTraits:
    traits: frozenset
    kind = "traits"


@dataclasses.dataclass(frozen=True)
class SetAggregates:
    aggregates: frozenset
    kind = "aggregates"


@dataclasses.dataclass(frozen=True)
class SetInventories:
    inventories: dict
    kind = "inventories"


def claimed_since(desired, observed):
    """Whether a server's claim has moved the provider's generation since ``observed``,
    so that a write on it would meet a 409: the node is in use now, its unit was free
    then, and it is to be reserved.  nova claims the provider in Placement before it
    tells Ironic the server's uuid, and a claim bumps the generation (a delete does
    not); in a boot storm every build otherwise cost the agents a conflict."""
    if observed is None or not desired.in_use or desired.resource_class is None:
        return False
    held = observed.inventories.get(desired.resource_class)
    return held is not None and held.get("reserved", 0) < desired.reserved


def needs_usages(desired, observed):
    """True when the plan depends on what is allocated: some class would go."""
    return observed is not None and any(
        rc != desired.resource_class for rc in observed.inventories)


def target_traits(desired, current):
    """The node's traits, the marker, and the nova-owned traits present (invariant 5).

    Everything else goes, as nova does it: a stale or foreign trait a flavor
    requires would make nova pick a node Ironic then refuses to deploy.
    """
    return model.provider_traits(desired, current)


def lacks_aggregates(desired, observed):
    """True when the plan decides the provider's aggregates (tenancy on) and
    ``observed`` does not say what it is in now (not read, or a cache entry from
    before tenancy): it must be read first."""
    return (desired.aggregates is not None and observed is not None
            and observed.aggregates is None)


def target_inventories(desired, observed):
    """The desired class, plus any other class still allocated (kept, fully reserved).

    A class change on a node with an instance therefore never fails: the old
    class stays until its allocation is gone, and only then is dropped.
    """
    target = dict(desired.inventories)
    usages = observed.usages or {}
    for rc, inv in observed.inventories.items():
        if rc not in target and usages.get(rc, 0) > 0:
            target[rc] = model.inventory(reserved=inv["total"], total=inv["total"])
    return target


def _managed_fields(inventories):
    return {rc: {f: inv.get(f) for f in model.INVENTORY_FIELDS} for rc, inv in inventories.items()}


def plan(desired, observed):
    """The operations, in order, that make Placement hold ``desired``.

    Traits and aggregates go before inventory, so a new or changed node never
    becomes schedulable before it carries the traits flavors may require or
    forbid and sits in the aggregates that confine it to its projects.  Of the
    aggregates, those that go leave before the traits change and those that come
    join after (``aggregate_steps``): no write lets in a project that may not
    deploy on the node.
    """
    if observed is None:
        if desired.resource_class is None:
            return ()  # nothing to offer: no provider (the node is reported as skipped)
        ops = [CreateProvider(desired.uuid, desired.name), SetTraits(desired.placement_traits)]
        if desired.aggregates:
            ops.append(SetAggregates(desired.aggregates))
        return (*ops, SetInventories(desired.inventories))
    if needs_usages(desired, observed) and observed.usages is None:
        raise ValueError(f"plan for {desired.uuid} needs usages")
    if lacks_aggregates(desired, observed):
        raise ValueError(f"plan for {desired.uuid} needs aggregates")
    traits = target_traits(desired, observed.traits)
    set_traits = [SetTraits(traits)] if traits != observed.traits else []
    ops = aggregate_steps(desired, observed, set_traits)
    inventories = target_inventories(desired, observed)
    if _managed_fields(inventories) != _managed_fields(observed.inventories):
        ops.append(SetInventories(inventories))
    return tuple(ops)


def aggregate_steps(desired, observed, set_traits):
    """``set_traits`` between the aggregate writes: leaving ones first, joining ones
    after (a project losing a node that turns public never sees it with the public
    trait; a project gaining one never sees it while it still carries the trait)."""
    if desired.aggregates is None:
        return list(set_traits)
    current = observed.aggregates
    target = tenancy.provider_aggregates(current, desired.aggregates,
                                         desired.managed_aggregates)
    leaving, joining = current - target, target - current
    ops = []
    if leaving:
        ops.append(SetAggregates(current - leaving if joining else target))
    ops += set_traits
    if joining:
        ops.append(SetAggregates(target))
    return ops


def apply(observed, ops):
    """What Placement holds after ``ops`` succeed (for the cache and for tests)."""
    state = observed
    for op in ops:
        if isinstance(op, CreateProvider):
            state = Observed(op.uuid, 0, {}, frozenset(), {}, frozenset())
        elif isinstance(op, SetTraits):
            state = dataclasses.replace(state, traits=op.traits, generation=state.generation + 1)
        elif isinstance(op, SetAggregates):
            state = dataclasses.replace(state, aggregates=op.aggregates,
                                        generation=state.generation + 1)
        elif isinstance(op, SetInventories):
            state = dataclasses.replace(state, inventories=op.inventories,
                                        generation=state.generation + 1)
    return state
