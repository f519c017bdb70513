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

"""Bare-metal tenancy: who may deploy on a node, told to nova's scheduler.  Pure.

Ironic records who a node belongs to (``owner``) and who rents it (``lessee``),
both Keystone project ids.  nova checks neither: it deploys with its own
credentials.  What nova's scheduler can do is confine a project to Placement
aggregates: with ``[scheduler] limit_tenants_to_placement_aggregate``, a request
of project X must land in a Placement aggregate whose uuid is that of a nova host
aggregate with metadata ``filter_tenant_id`` = X (``require_tenant_aggregate``
in nova/scheduler/request_filter.py); a project with no such aggregate is not
confined.  Hence two marks on each node:

* the node's provider is in the *tenant aggregate* of every project that may
  deploy on it: a nova aggregate with no hosts that the reporter keeps, one per
  project (nova reads the uuid, never the hosts);
* a node nobody claims carries ``PUBLIC_TRAIT``, on the Ironic node (nova's driver
  replaces a provider's traits with the node's own every periodic, and copies a
  flavor's required traits to the deploy, where Ironic checks them again).
  Public flavors require it; a project's dedicated flavor forbids it.

Ironic's automatic lessee (``driver_internal_info['automatic_lessee']``, set from
the server's project at deploy) is nobody's claim: counting it would give every
project that boots a server an aggregate, confining it to the nodes it already
uses, and take the public trait off a deployed node, failing its rebuild.
"""

import dataclasses

PUBLIC_TRAIT = "CUSTOM_BAREMETAL_PUBLIC"
# The nova aggregate of a project: its name says what it is (nova's names are unique,
# so two agents creating the same one find each other's), its metadata is nova's.
AGGREGATE_PREFIX = "rp-reporter-tenant-"
TENANT_KEY = "filter_tenant_id"
LESSEE_ELSE_OWNER = "lessee_else_owner"  # a lease hands the node over, as a lease does
OWNER_OR_LESSEE = "owner_or_lessee"      # Ironic's own API rule: both may deploy
RULES = (LESSEE_ELSE_OWNER, OWNER_OR_LESSEE)
# What a node record must carry for tenancy (Ironic API 1.50 owner, 1.65 lessee;
# model.automatic_lessee reads driver_internal_info).
FIELDS = ("owner", "lessee", "driver_internal_info")


@dataclasses.dataclass(frozen=True)
class Claim:
    """Who may deploy on a node: ``projects`` (empty: anyone, the node is public)
    and ``why``, one line for ``status --explain`` and the logs."""

    projects: frozenset
    why: str

    @property
    def public(self):
        return not self.projects


def _project(value):
    return value if isinstance(value, str) and value.strip() else None


def claim(owner, lessee, automatic_lessee=False, rule=LESSEE_ELSE_OWNER,
          public_owners=frozenset()):
    """The Claim on a node with this ``owner`` and ``lessee`` (model.Node's fields).

    ``rule``: LESSEE_ELSE_OWNER, the lessee where there is one, else the owner;
    OWNER_OR_LESSEE, both.  An owner in ``public_owners`` (the operator's own
    project, say) claims nothing; an ``automatic_lessee`` is nobody's claim."""
    if rule not in RULES:
        raise ValueError(f"tenancy rule {rule!r} is not one of {', '.join(RULES)}")
    owner, lessee = _project(owner), _project(lessee)
    notes = []
    if owner is not None and owner in public_owners:
        notes.append(f"owner {owner} is public")
        owner = None
    if lessee is not None and automatic_lessee:
        notes.append(f"lessee {lessee} set by Ironic at deploy")
        lessee = None
    if rule == OWNER_OR_LESSEE:
        projects = frozenset(p for p in (owner, lessee) if p)
        said = " and ".join(f"{k} {p}" for k, p in (("owner", owner), ("lessee", lessee)) if p)
    elif lessee is not None:
        projects, said = frozenset({lessee}), f"lessee {lessee}"
    else:
        projects, said = frozenset({owner} if owner else ()), f"owner {owner}" if owner else ""
    why = f"may deploy: {said}" if projects else "public: nobody claims it"
    return Claim(projects, "; ".join([why, *notes]))


def claim_on(node, rule=LESSEE_ELSE_OWNER, public_owners=frozenset()):
    """``claim`` of a model.Node (its owner, lessee and automatic_lessee)."""
    return claim(node.owner, node.lessee, node.automatic_lessee, rule, public_owners)


def aggregate_name(project):
    return AGGREGATE_PREFIX + project


def tenant_project(aggregate):
    """The project a nova aggregate (os-aggregates record) is the tenant aggregate of,
    or None when it is not one of ours (another name, or metadata that disagrees)."""
    name = aggregate.get("name") or ""
    if not name.startswith(AGGREGATE_PREFIX):
        return None
    project = name[len(AGGREGATE_PREFIX):]
    metadata = aggregate.get("metadata") or {}
    return project if metadata.get(TENANT_KEY) == project else None


def wanted_aggregates(projects, tenant_aggregates, kept=frozenset()):
    """The aggregates a node's provider must be in: the tenant aggregates of the
    projects that may deploy on it (``tenant_aggregates``: {project: uuid}) and
    ``kept``, those every node must be in (the compute host's availability zone:
    nova mirrors only a host's first node).  A deployer without a tenant aggregate
    is a KeyError: its aggregate is made first, so a node is never put in an
    aggregate nobody's request can name."""
    return frozenset(tenant_aggregates[p] for p in projects) | frozenset(kept)


def provider_aggregates(current, wanted, managed):
    """The provider's aggregates: another writer's stay; of those the reporter
    manages (``managed``: every tenant aggregate), exactly the ``wanted`` ones."""
    return (frozenset(current) - frozenset(managed)) | frozenset(wanted)


def derived_traits(claim_):
    """The Ironic node traits tenancy derives: the public trait on a public node.

    (In Placement, ``sync.plan`` orders the writes so no step lets in a project
    that may not deploy.)"""
    return frozenset({PUBLIC_TRAIT}) if claim_.public else frozenset()
