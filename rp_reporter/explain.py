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

"""Every rule that decides a node's provider, in words.  Pure.

``rp-reporter status NODE --explain`` gathers the inputs (the node as Ironic has
it, what Placement holds, the ring's owner, the reporter's scope) and prints
what ``explain()`` says: why the node is reserved or skipped, which class and
traits its provider carries, who owns it, what Placement holds and what a
flavor needs to land on it.  It asks the model the questions the agent asks
(``model.desired``, ``unusable``, ``in_use``, ``normalize_resource_class``,
``provider_traits``) and the planner what it would write, so the explanation
and the agent can never disagree.
"""

from __future__ import annotations

import dataclasses

from rp_reporter import model
from rp_reporter import tenancy
from rp_reporter.sync import plan as planner
from rp_reporter.traits import flavor_extra_specs


@dataclasses.dataclass(frozen=True)
class Scope:
    """The reporter's view: its host, the ring's owner, how members are known."""

    host: str = ""
    owner: str | None = None  # None: no live agent
    membership: str = ""  # "alive", "static (liveness not tracked)", "alone"
    conductor_group: str | None = None
    shard: str | None = None
    skip_reserve_in_use: bool = False
    tenancy_rule: str | None = None  # [tenancy] rule when it is enabled, else None
    public_owners: frozenset = frozenset()


def _reserved_reasons(node):
    reasons = []
    if node.maintenance:
        reasons.append("it is in maintenance")
    if node.power_state in model.BAD_POWER_STATES:
        reasons.append(f"its power state is {node.power_state or 'unknown (none)'}")
    if node.provision_state not in model.GOOD_PROVISION_STATES:
        reasons.append(f"its provision state is {node.provision_state}, not available")
    return reasons


def _in_scope(node, scope):
    gaps = []
    if scope.conductor_group is not None and (
            (node.conductor_group or "") != scope.conductor_group.lower()):
        gaps.append(f"its conductor group is {node.conductor_group or '(default)'!s}, this "
                    f"reporter's [ironic] conductor_group is {scope.conductor_group}")
    if scope.shard is not None and node.shard != scope.shard:
        gaps.append(f"its shard is {node.shard or '(none)'}, this reporter's [ironic] shard "
                    f"is {scope.shard}")
    return gaps


def _names(items):
    return ", ".join(sorted(items)) if items else "none"


def explain(node, observed, scope=Scope()):
    """[(topic, sentence)] for one node.

    ``node`` is a ``model.Node``; ``observed`` a ``plan.Observed`` (with usages
    when ``plan.needs_usages`` says the decision depends on them) or None when
    Placement has no provider for the node.
    """
    desired = model.desired(node, skip_reserve_in_use=scope.skip_reserve_in_use)
    ops = planner.plan(desired, observed)
    return [("provider", f"uuid and name {desired.uuid} (the node's uuid, as nova-compute's "
                         f"Ironic driver names it, so the two never fight over it)"),
            *_scope_and_owner(node, scope), *_class(node, desired),
            *_reserved(node, desired, scope), *_traits(desired, observed),
            *_tenancy(node, scope), *_placement(desired, observed, ops),
            *_flavor(desired, ops)]


def _scope_and_owner(node, scope):
    gaps = _in_scope(node, scope)
    if gaps:
        yield ("scope", "outside this reporter's scope (" + "; ".join(gaps) + "): it never "
                        "writes or deletes this node's provider; the reporter of that scope does")
    if scope.owner is None:
        yield ("owner", "no live agent in the [coordination] group: nobody syncs this node "
                        "until one joins (a one-shot `rp-reporter reconcile` still does)")
    else:
        how = f" ({scope.membership})" if scope.membership else ""
        mine = " (this host)" if scope.owner == scope.host else ""
        yield ("owner", f"{scope.owner}{mine} syncs it: the hash ring over the members{how} "
                        f"maps the node's uuid to it. Losing ownership never deletes the provider")


def _class(node, desired):
    if desired.resource_class is None:
        yield ("class", f"skipped: {desired.problem}. The provider gets no inventory, so nova "
                        f"cannot schedule to this node; give it a class with `rp-reporter "
                        f"resource-class set --resource-class CLASS {node.uuid}`")
    else:
        yield ("class", f"Ironic resource_class {node.resource_class!r} is Placement class "
                        f"{desired.resource_class} (nova's normalization: each run of "
                        f"characters outside A-Za-z0-9 becomes _, upper case, CUSTOM_ in "
                        f"front); total 1, min/max/step 1, allocation ratio 1.0")


def _reserved(node, desired, scope):
    reasons = _reserved_reasons(node)
    if model.in_use(node):
        if scope.skip_reserve_in_use and not model.unusable(node):
            yield ("in use", f"instance {node.instance_uuid} is on it, but [reconcile] "
                             f"skip_reserve_in_use is set (nova's [workarounds] "
                             f"skip_reserve_in_use_ironic_nodes): not reserved for that")
        else:
            reasons.append(f"instance {node.instance_uuid} is on it")
    if desired.resource_class is None:
        return
    if desired.reserved:
        yield ("reserved", "1, so no new instance lands here, because " + "; ".join(reasons)
                           + " (nova's rules)")
    else:
        yield ("reserved", "0: schedulable. It is not in maintenance, its power state "
                           f"({node.power_state}) is known, its provision state is "
                           f"{node.provision_state or 'unset (NOSTATE, usable as in nova)'}"
                           + ("" if model.in_use(node) else ", and it has no instance"))


def _traits(desired, observed):
    current = observed.traits if observed is not None else frozenset()
    target = model.provider_traits(desired, current)
    kept_nova = {t for t in target if t.startswith(model.NOVA_OWNED_PREFIXES)}
    yield ("traits", f"the node's traits ({_names(desired.traits)}), the marker "
                     f"{model.MANAGED_TRAIT} (how a reporter's listing finds its providers)"
                     + (f", and nova's own {_names(kept_nova)}, kept where present"
                        if kept_nova else "") + "; nothing else")
    if desired.refused_traits:
        yield ("traits refused", f"{_names(desired.refused_traits)}: in rp_reporter's own "
                                 f"namespace {model.OWN_PREFIX}* or not a valid trait name, "
                                 f"so left out (nova would pass them on and fail the update)")
    if observed is not None and current - target:
        yield ("traits removed", f"{_names(current - target)}: Placement has them and the "
                                 f"node does not; Ironic's traits are the truth, as in nova")


def _tenancy(node, scope):
    if scope.tenancy_rule is None:
        return
    claim = tenancy.claim_on(node, scope.tenancy_rule, scope.public_owners)
    public = tenancy.PUBLIC_TRAIT
    if claim.public:
        yield ("tenancy", f"{claim.why}. The node carries {public} (on the Ironic node, so "
                          f"nova's periodic keeps it on the provider) and is in no tenant "
                          f"aggregate: a flavor requiring {public} lands here for any project "
                          f"nova does not confine to its own aggregate")
    else:
        names = ", ".join(tenancy.aggregate_name(p) for p in sorted(claim.projects))
        yield ("tenancy", f"{claim.why}. Its provider is in the nova aggregate {names} "
                          f"(metadata {tenancy.TENANT_KEY}) and the node lacks {public}: with "
                          f"nova's [scheduler] limit_tenants_to_placement_aggregate, only "
                          f"those projects' requests reach it, with a flavor that forbids "
                          f"{public}")


def _placement(desired, observed, ops):
    if observed is None and desired.resource_class is None:
        yield ("placement", "no provider, and none is created while the node offers nothing")
    elif observed is None:
        yield ("placement", "no provider yet: the owner creates it (provider, then traits, "
                            "then inventory, so it is never schedulable without its traits)")
    else:
        held = ", ".join(f"{rc} reserved {inv.get('reserved')} of {inv.get('total')}"
                         for rc, inv in sorted(observed.inventories.items())) or "no inventory"
        aggregates = ("" if observed.aggregates is None
                      else f"; aggregates {_names(observed.aggregates)}")
        yield ("placement", f"holds {held}; generation {observed.generation}; traits "
                            f"{_names(observed.traits)}{aggregates}")
        for rc in sorted(observed.inventories):
            used = (observed.usages or {}).get(rc, 0)
            if rc != desired.resource_class and used > 0:
                yield ("allocation", f"{rc} still carries an allocation ({used}): kept, fully "
                                     f"reserved, beside the new class until the instance is "
                                     f"gone, then dropped (Placement refuses to drop it sooner)")
            elif rc != desired.resource_class:
                yield ("class dropped", f"{rc} is no longer the node's class and holds no "
                                        f"allocation: removed")
    if not ops:
        yield ("in step", "yes: Placement matches the node; nothing to write")
    else:
        yield ("in step", "no: the next sync writes " + "; ".join(_op_words(op) for op in ops))


def _flavor(desired, ops):
    if desired.resource_class is None:
        yield ("flavor", "no flavor lands here while the node has no usable class")
        return
    specs = flavor_extra_specs(desired.resource_class)
    traits = " ".join(f"trait:{t}=required" for t in sorted(desired.traits))
    now = ("it can land now" if not desired.reserved and not ops else
           "it cannot land now (reserved)" if desired.reserved else
           "it can land once Placement is in step")
    yield ("flavor", f"{specs}" + (f", optionally any of {traits}" if traits else "")
                     + f" (a required trait the node lacks sends nova elsewhere); {now}")


def _op_words(op):
    if op.kind == "create":
        return "create the provider"
    if op.kind == "traits":
        return f"set traits to {_names(op.traits)}"
    if op.kind == "aggregates":
        return f"set aggregates to {_names(op.aggregates)}"
    if op.kind == "inventories":
        return "set inventory " + (", ".join(
            f"{rc} reserved {inv['reserved']}" for rc, inv in sorted(op.inventories.items()))
            or "to nothing")
    return op.kind


def render(rows):
    """The explanation as text, one rule a line."""
    width = max((len(topic) for topic, _ in rows), default=0)
    return "\n".join(f"{topic.rjust(width)}: {text}" for topic, text in rows)
