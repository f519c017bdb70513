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

"""``rp-reporter reconcile``: make Placement match Ironic once, or show the plan."""

import json

from cliff import lister

from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli import nodes
from rp_reporter.cli import plans


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
        summary = reconciler.run(dry_run=parsed_args.dry_run, progress=nodes.Progress(),
                                 allow_mass_deletion=parsed_args.allow_mass_deletion)
        if summary.deletion_refused:
            self.warn(f"deletion refused: {summary.deletion_refused}")
        if not summary.converged:
            self.exit_code = app.EXIT_FAILED
        if parsed_args.dry_run:
            return self.PLAN_COLUMNS, plans.plan_rows(summary)
        values = summary.as_dict()
        if parsed_args.formatter == "table":
            for key in ("skipped_reasons", "failures", "placement_requests"):
                values[key] = json.dumps(values[key], sort_keys=True)
        return self.SUMMARY_COLUMNS, [tuple(values[c] for c in self.SUMMARY_COLUMNS)]
