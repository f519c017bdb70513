"""``rp-reporter reconcile``: make Placement match Ironic once, or show the plan."""

import json
import sys

from cliff import lister

from rp_reporter import wiring
from rp_reporter.cli import app
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


class Progress:
    """A one-line counter on a terminal; silent when stderr is piped."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()

    def __call__(self, done, total):
        if self.enabled and (done == total or done % 100 == 0):
            end = "\n" if done == total else ""
            self.stream.write(f"\r{done}/{total} nodes{end}")
            self.stream.flush()


class Reconcile(app.CommandMixin, lister.Lister):
    """Make Placement match the Ironic nodes this reporter is responsible for.

    Prints a one-row summary (nodes, created, updated, unchanged, skipped,
    deleted, kept, failed, Placement requests by method, seconds, and why
    deletions were refused); exits 0 when everything converged, 1 when some
    node failed or the deletion guard refused, 2 on bad configuration.
    With --dry-run, prints the plan per node and writes nothing.
    """

    SUMMARY_COLUMNS = ("nodes", "created", "updated", "unchanged", "skipped", "deleted", "kept",
                       "failed", "skipped_reasons", "failures", "placement_requests", "seconds",
                       "deletion_refused")
    PLAN_COLUMNS = ("node", "operation", "inventory_before", "inventory_after", "traits_before",
                    "traits_after", "reason")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--dry-run", action="store_true",
                            help="Print the plan per node; write nothing.")
        parser.add_argument("--allow-mass-deletion", action="store_true",
                            help="Let this pass delete more than [reconcile] "
                                 "max_deletion_share of the managed providers, or all of "
                                 "them (a real decommission). Absences must still be seen "
                                 "in complete listings an interval apart.")
        return parser

    def take_action(self, parsed_args):
        reconciler = wiring.reconciler(self.app.conf)
        summary = reconciler.run(dry_run=parsed_args.dry_run, progress=Progress(),
                                 allow_mass_deletion=parsed_args.allow_mass_deletion)
        if summary.deletion_refused:
            self.warn(f"deletion refused: {summary.deletion_refused}")
        if not summary.converged:
            self.exit_code = app.EXIT_FAILED
        if parsed_args.dry_run:
            return self.PLAN_COLUMNS, plan_rows(summary)
        values = summary.as_dict()
        if parsed_args.formatter == "table":
            for key in ("skipped_reasons", "failures", "placement_requests"):
                values[key] = json.dumps(values[key], sort_keys=True)
        return self.SUMMARY_COLUMNS, [tuple(values[c] for c in self.SUMMARY_COLUMNS)]

