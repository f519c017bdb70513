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

"""A reconcile pass's plan in words: a row per node for ``reconcile --dry-run``
(``plan_rows``) and one line per node for the audit's drift (``describe_ops``).

Shared by the commands; imports none of them.
"""

from rp_reporter.sync import plan as planner


def _traits(traits):
    return " ".join(sorted(traits)) if traits is not None else ""


def _inventory(inventories):
    return " ".join(f"{rc}:reserved={inv['reserved']}/total={inv['total']}"
                    for rc, inv in sorted(inventories.items())) if inventories else ""


def describe_ops(result):
    """One line: what the writes would change, before -> after."""
    after = planner.apply(result.before, result.ops)
    parts = []
    before_inv = result.before.inventories if result.before else {}
    if _inventory(before_inv) != _inventory(after.inventories):
        parts.append(f"inventory {_inventory(before_inv) or '(none)'} -> "
                     f"{_inventory(after.inventories) or '(none)'}")
    before_traits = result.before.traits if result.before else frozenset()
    if before_traits != after.traits:
        added, removed = after.traits - before_traits, before_traits - after.traits
        parts.append("traits " + " ".join([f"+{t}" for t in sorted(added)]
                                          + [f"-{t}" for t in sorted(removed)]))
    before_aggregates = (result.before.aggregates if result.before else None) or frozenset()
    if after.aggregates is not None and before_aggregates != after.aggregates:
        added, removed = after.aggregates - before_aggregates, before_aggregates - after.aggregates
        parts.append("aggregates " + " ".join([f"+{a}" for a in sorted(added)]
                                              + [f"-{a}" for a in sorted(removed)]))
    if result.before is None:
        parts.insert(0, "no provider")
    return "; ".join(parts)


def plan_rows(summary):
    """One row per node that would change: operation, inventory and traits before/after."""
    rows = []
    for result in sorted(summary.results, key=lambda r: r.uuid):
        if not result.ops and result.outcome.value not in ("deleted", "kept", "failed"):
            continue
        before = result.before
        after = planner.apply(before, result.ops) if result.ops else before
        rows.append((
            result.uuid,
            " ".join(op.kind for op in result.ops) or result.outcome.value,
            _inventory(before.inventories) if before else "",
            _inventory(after.inventories) if after else "",
            _traits(before.traits) if before else "",
            _traits(after.traits) if after else "",
            result.reason or "",
        ))
    return rows
