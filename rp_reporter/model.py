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

"""An Ironic node, and the Placement resource provider it should be.  Pure.

The agent, the CLI (reconcile, dry-run, audit) and the nova-compute driver
all call ``desired()``, so they can never disagree about a node.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import uuid as uuidlib

import os_resource_classes as orc

# A node and its provider are held once per node of the fleet (100,000 here): slotted
# where the Python has it (3.10 on; 2025.1 also runs on 3.9).
SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}

# Placement's own limits for custom class and trait names.
NAME_RE = re.compile(r"^[A-Z0-9_]+$")
NAME_MAX = 255

# Traits (invariant 5): Ironic's node traits are the truth, as in nova, which
# hands a flavor's required traits to Ironic (Ironic refuses a deploy on a node
# without them).  A provider carries the node's traits, MANAGED_TRAIT (how the
# agent's listing finds the providers it manages), and the traits nova's
# resource tracker owns (NOVA_OWNED_PREFIXES) where present; nothing else stays.
# rp_reporter's own namespace (OWN_PREFIX) never comes from a node.
OWN_PREFIX = "CUSTOM_RPR_"
MANAGED_TRAIT = "CUSTOM_RPR_MANAGED"
# Earlier versions wrote a twin CUSTOM_RPR_ADDED_<T> beside every trait T they
# added; a pass removes them like any other trait the node does not have.
LEGACY_ADDED_PREFIX = "CUSTOM_RPR_ADDED_"
# Set by nova's resource tracker on its compute node providers (COMPUTE_NODE,
# COMPUTE_STATUS_DISABLED, the driver's capability traits, OWNER_NOVA).
NOVA_OWNED_PREFIXES = ("COMPUTE_", "OWNER_")

# Ironic states that make a node unusable (nova's rules, ironic driver; nova
# keeps Ironic's NOSTATE, None, as a good provision state for old nodes).
GOOD_PROVISION_STATES = frozenset({"available", None})
BAD_POWER_STATES = frozenset({"error", None})

INVENTORY_FIELDS = ("total", "reserved", "min_unit", "max_unit", "step_size", "allocation_ratio")


class InvalidNode(ValueError):
    """The node record cannot be read; the message says which field and why."""


@dataclasses.dataclass(frozen=True, **SLOTS)
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
    # Read only with tenancy on (rp_reporter.tenancy): Keystone project ids, and
    # whether Ironic set the lessee itself at deploy.
    owner: str | None = None
    lessee: str | None = None
    automatic_lessee: bool = False


@dataclasses.dataclass(frozen=True, **SLOTS)
class Desired:
    """What Placement should hold for one node.

    ``resource_class`` is None when the node offers nothing (no class, or one
    that cannot be a Placement class); ``problem`` then says why.
    ``refused_traits`` names node traits that cannot be provider traits (in
    rp_reporter's own namespace, or not a valid trait name): they are left
    out of ``traits``, and the caller logs it once (the model is pure).
    """

    uuid: str
    name: str
    resource_class: str | None
    reserved: int
    traits: frozenset
    problem: str | None = None
    refused_traits: frozenset = frozenset()
    # Tenancy (rp_reporter.tenancy): the aggregates the provider must be in, and every
    # aggregate the reporter decides (of those, only ``aggregates`` stay).  None: the
    # reporter leaves the provider's aggregates alone.
    aggregates: frozenset | None = None
    managed_aggregates: frozenset = frozenset()
    # A server is on the node (Ironic's instance_uuid): nova claimed it in Placement
    # first, and that claim moved the provider's generation.
    in_use: bool = False

    @property
    def inventories(self):
        if self.resource_class is None:
            return {}
        return {self.resource_class: inventory(self.reserved)}

    @property
    def placement_traits(self):
        """The traits a provider rp_reporter creates carries: the node's and the marker."""
        return self.traits | {MANAGED_TRAIT}

    @property
    def refusal(self):
        """One line about the refused traits, or None."""
        if not self.refused_traits:
            return None
        names = ", ".join(sorted(str(t)[:64] for t in self.refused_traits))
        return (f"node traits refused (rp_reporter's own namespace {OWN_PREFIX}*, or not a "
                f"valid trait name): {names}")


def inventory(reserved, total=1):
    return {"total": total, "reserved": reserved, "min_unit": 1, "max_unit": 1,
            "step_size": 1, "allocation_ratio": 1.0}


def provider_traits(desired, current, add_marker=True):
    """The traits a provider should carry, given the ones it carries now.

    The node's traits, the marker (added when ``add_marker``, else kept where
    present), and whatever nova's resource tracker owns that is present;
    everything else goes, as in nova (the ``CUSTOM_RPR_ADDED_*`` twins of
    earlier versions included).
    """
    kept = {t for t in current if t.startswith(NOVA_OWNED_PREFIXES)}
    if add_marker or MANAGED_TRAIT in current:
        kept.add(MANAGED_TRAIT)
    return frozenset(desired.traits | kept)


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
        # Interned: the node's uuid is held by its desired state, the observation
        # cache, the listings of every pass; one string each, not one per holder
        # (each copy costs memory in proportion to the fleet).
        return sys.intern(str(uuidlib.UUID(str(value))))
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
    if not isinstance(traits, (list, tuple, set, frozenset)):
        raise InvalidNode(f"traits is a {type(traits).__name__}, not a list")
    # An invalid trait name costs that trait, not the node: provider() refuses it
    # (one log line) and the node's state is still reported, as nova's driver does.
    traits = [t if isinstance(t, str) else f"<a {type(t).__name__}>" for t in traits]
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
        owner=_optional_str(record, "owner"),
        lessee=_optional_str(record, "lessee"),
        automatic_lessee=automatic_lessee(record),
    )


def automatic_lessee(record):
    """Whether Ironic set the node's lessee itself, from the server it deployed
    (``driver_internal_info['automatic_lessee']``, cleared at tear-down)."""
    internal = record.get("driver_internal_info")
    return isinstance(internal, dict) and internal.get("automatic_lessee") is True


def unusable(node):
    """Nova's rule: the node cannot take a new instance right now."""
    return (node.maintenance
            or node.power_state in BAD_POWER_STATES
            or node.provision_state not in GOOD_PROVISION_STATES)


def in_use(node):
    return node.instance_uuid is not None


def acceptable_trait(trait):
    return valid_name(trait) and not trait.startswith(OWN_PREFIX)


def provider(uuid, resource_class, unusable, in_use, traits, skip_reserve_in_use=False):
    """The provider for a node, from the answers to nova's questions about it.

    ``desired()`` asks them of a Node; the nova-compute driver asks nova's own
    driver methods, so both end here.  ``skip_reserve_in_use`` is nova's
    ``[workarounds] skip_reserve_in_use_ironic_nodes``: a node in use but
    otherwise usable is not reserved.
    """
    resource_class, problem = normalize_resource_class(resource_class)
    traits = frozenset(traits)
    refused = frozenset(t for t in traits if not acceptable_trait(t))
    return Desired(
        uuid=uuid,
        # Provider name = node uuid, as nova-compute's ironic driver names it,
        # so both can run against one Placement without fighting.
        name=uuid,
        resource_class=resource_class,
        reserved=int(bool(unusable or (in_use and not skip_reserve_in_use))),
        traits=traits - refused,
        problem=problem,
        refused_traits=refused,
        in_use=bool(in_use),
    )


def desired(node, skip_reserve_in_use=False):
    """The provider Placement should hold for this node."""
    return provider(node.uuid, node.resource_class, unusable(node), in_use(node), node.traits,
                    skip_reserve_in_use)
