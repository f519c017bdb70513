"""An Ironic node, and the Placement resource provider it should be.  Pure.

The agent, the CLI (reconcile, dry-run, audit) and the nova-compute driver
all call ``desired()``, so they can never disagree about a node.
"""

import dataclasses
import re
import uuid as uuidlib

import os_resource_classes as orc

# Placement's own limits for custom class and trait names.
NAME_RE = re.compile(r"^[A-Z0-9_]+$")
NAME_MAX = 255

# Trait bookkeeping, kept in Placement itself so every agent (after a crash,
# a restart or a ring rebalance) knows what it may remove:
#   MANAGED_TRAIT          on every provider rp_reporter manages;
#   ADDED_PREFIX + T       beside each trait T that rp_reporter added.
# A trait without its ADDED_ twin was set by someone else and is never removed.
MANAGED_TRAIT = "CUSTOM_RPR_MANAGED"
ADDED_PREFIX = "CUSTOM_RPR_ADDED_"

# Ironic states that make a node unusable (nova's rules, ironic driver).
GOOD_PROVISION_STATES = frozenset({"available"})
BAD_POWER_STATES = frozenset({"error", None})

INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


class InvalidNode(ValueError):
    """The node record cannot be read; the message says which field and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class Node:
    """The fields of an Ironic node that the model reads."""

    uuid: str
    name: str | None = None
    resource_class: str | None = None
    provision_state: str | None = None
    power_state: str | None = None
    maintenance: bool = False
    instance_uuid: str | None = None
    traits: frozenset = frozenset()
    conductor_group: str | None = None
    shard: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Desired:
    """What Placement should hold for one node.

    ``resource_class`` is None when the node offers nothing (no class, or one
    that cannot be a Placement class); ``problem`` then says why.
    """

    uuid: str
    name: str
    resource_class: str | None
    reserved: int
    traits: frozenset
    problem: str | None = None

    @property
    def inventories(self):
        if self.resource_class is None:
            return {}
        return {self.resource_class: inventory(self.reserved)}

    @property
    def placement_traits(self):
        """Every trait the provider should carry, bookkeeping included."""
        return self.traits | {added_marker(t) for t in self.traits if added_marker(t)} | {
            MANAGED_TRAIT}


def inventory(reserved, total=1):
    return {"total": total, "reserved": reserved, "min_unit": 1, "max_unit": 1,
            "step_size": 1, "allocation_ratio": 1.0}


def added_marker(trait):
    """The twin that records 'rp_reporter added trait', or None if it cannot exist."""
    marker = ADDED_PREFIX + trait
    return marker if len(marker) <= NAME_MAX else None


def valid_name(name):
    return isinstance(name, str) and len(name) <= NAME_MAX and bool(NAME_RE.match(name))


def normalize_resource_class(name):
    """Nova's exact normalization, so flavors written for nova keep working.

    Returns (placement_name, None) or (None, reason).
    """
    if name is None or name == "":
        return None, "node has no resource_class"
    if not isinstance(name, str):
        return None, f"resource_class is a {type(name).__name__}, not a string"
    normalized = orc.normalize_name(name)
    if not any(c.isalnum() for c in normalized[len(orc.CUSTOM_NAMESPACE):]):
        return None, f"resource_class {name!r} normalizes to nothing"
    if not valid_name(normalized):
        return None, f"resource_class {name!r} gives {len(normalized)} characters, over {NAME_MAX}"
    return normalized, None


def _uuid(value, field):
    try:
        return str(uuidlib.UUID(str(value)))
    except (TypeError, ValueError, AttributeError):
        raise InvalidNode(f"{field} {str(value)[:64]!r} is not a UUID") from None


def _optional_str(record, field):
    value = record.get(field)
    if value is not None and not isinstance(value, str):
        raise InvalidNode(f"{field} is a {type(value).__name__}, not a string")
    return value


def node_from_api(record):
    """Read an Ironic API node record (a dict) into a Node, or raise InvalidNode."""
    if not isinstance(record, dict):
        raise InvalidNode(f"node record is a {type(record).__name__}, not an object")
    node_uuid = _uuid(record.get("uuid"), "uuid")
    maintenance = record.get("maintenance", False)
    if not isinstance(maintenance, bool):
        raise InvalidNode(f"maintenance is a {type(maintenance).__name__}, not a boolean")
    instance_uuid = record.get("instance_uuid")
    if instance_uuid is not None:
        instance_uuid = _uuid(instance_uuid, "instance_uuid")
    traits = record.get("traits") or []
    if not isinstance(traits, list | tuple | set | frozenset):
        raise InvalidNode(f"traits is a {type(traits).__name__}, not a list")
    bad = [t for t in traits if not valid_name(t)]
    if bad:
        raise InvalidNode(f"trait {str(bad[0])[:64]!r} is not a valid trait name")
    # Ironic's resource_class is free text; odd types are the model's to report.
    resource_class = record.get("resource_class")
    return Node(
        uuid=node_uuid,
        name=_optional_str(record, "name"),
        resource_class=resource_class,
        provision_state=_optional_str(record, "provision_state"),
        power_state=_optional_str(record, "power_state"),
        maintenance=maintenance,
        instance_uuid=instance_uuid,
        traits=frozenset(traits),
        conductor_group=_optional_str(record, "conductor_group"),
        shard=_optional_str(record, "shard"),
    )


def unusable(node):
    """Nova's rule: the node cannot take a new instance right now."""
    return (node.maintenance
            or node.power_state in BAD_POWER_STATES
            or node.provision_state not in GOOD_PROVISION_STATES)


def in_use(node):
    return node.instance_uuid is not None


def desired(node):
    """The provider Placement should hold for this node."""
    resource_class, problem = normalize_resource_class(node.resource_class)
    return Desired(
        uuid=node.uuid,
        # Provider name = node uuid, as nova-compute's ironic driver names it,
        # so both can run against one Placement without fighting.
        name=node.uuid,
        resource_class=resource_class,
        reserved=int(unusable(node) or in_use(node)),
        traits=node.traits,
        problem=problem,
    )
