"""desired + observed -> the Placement writes that make them equal.  Pure.

The executor applies the operations in order, each carrying the provider
generation; on a conflict it re-observes and calls ``plan`` again.
"""

import dataclasses

from rp_reporter import model


@dataclasses.dataclass(frozen=True, slots=True)
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
class SetInventories:
    inventories: dict
    kind = "inventories"


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

    Traits go before inventory, so a new or changed node never becomes
    schedulable before it carries the traits flavors may require or forbid.
    """
    if observed is None:
        if desired.resource_class is None:
            return ()  # nothing to offer: no provider (the node is reported as skipped)
        return (CreateProvider(desired.uuid, desired.name),
                SetTraits(desired.placement_traits),
                SetInventories(desired.inventories))
    if needs_usages(desired, observed) and observed.usages is None:
        raise ValueError(f"plan for {desired.uuid} needs usages")
    ops = []
    traits = target_traits(desired, observed.traits)
    if traits != observed.traits:
        ops.append(SetTraits(traits))
    inventories = target_inventories(desired, observed)
    if _managed_fields(inventories) != _managed_fields(observed.inventories):
        ops.append(SetInventories(inventories))
    return tuple(ops)


def apply(observed, ops):
    """What Placement holds after ``ops`` succeed (for the cache and for tests)."""
    state = observed
    for op in ops:
        if isinstance(op, CreateProvider):
            state = Observed(op.uuid, 0, {}, frozenset(), {})
        elif isinstance(op, SetTraits):
            state = dataclasses.replace(state, traits=op.traits, generation=state.generation + 1)
        elif isinstance(op, SetInventories):
            state = dataclasses.replace(state, inventories=op.inventories,
                                        generation=state.generation + 1)
    return state
