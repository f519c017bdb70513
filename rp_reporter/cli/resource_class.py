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

"""``rp-reporter resource-class set|unset|audit``: give nodes a class, safely, and see
what is missing or out of step (the audit's capability rows included)."""

import collections

from cliff import lister

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import traits
from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli import flavor_specs
from rp_reporter.cli import nodes
from rp_reporter.cli import plans
from rp_reporter.sync import capability_traits
from rp_reporter.sync.provider import Outcome


class _Change(app.CommandMixin, lister.Lister):
    """Shared by set and unset: resolve nodes, change each, list every outcome."""

    COLUMNS = ("node", "name", "before", "after", "placement_class", "flavor_extra_specs",
               "result")

    def _targets(self, ironic, args):
        # A named node is read without its properties, as it always was.
        fields = () if args.nodes else ("properties",)
        return nodes.named_or_all(ironic, args.nodes, extra_fields=fields)

    def _apply(self, ironic, records, missing, new_class, args):
        rc = flavor_specs.placement_class(new_class) if new_class is not None else ""
        specs = traits.flavor_extra_specs(rc) if rc else ""
        rows = [(ident, "", "", "", "", "", "failed: no such node") for ident in missing]
        for record in nodes.walk(records):
            before = record.get("resource_class")
            if before == new_class:
                result = "unchanged"
            elif args.dry_run:
                result = "would change"
            else:
                try:
                    ironic.set_resource_class(record["uuid"], new_class)
                    result = "changed"
                except errors.ServiceError as e:
                    if e.kind in (errors.DENIED, errors.MISCONFIGURED):
                        raise  # the same for every node: one line, exit 2
                    result = f"failed: {e}"  # listed, and the exit is 1: nothing hidden
                except Exception as e:  # noqa: BLE001 - that node's failure, listed
                    result = f"failed: {e}"
            rows.append((record["uuid"], record.get("name") or "", before or "", new_class or "",
                         rc, specs, result))
        if any(r[-1].startswith("failed") for r in rows):
            self.exit_code = app.EXIT_FAILED
        return self.COLUMNS, rows


class Set(_Change):
    """Set the resource_class of the named nodes, or of every node matching the filters."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--resource-class", required=True, metavar="NAME")
        nodes.add_node_names(parser)
        parser.add_argument("--no-class", action="store_true",
                            help="Only nodes without a resource_class yet.")
        parser.add_argument("--current-class", metavar="NAME", help="Only nodes of this class.")
        nodes.add_filter_options(parser)
        parser.add_argument("--dry-run", action="store_true", help="Show before and after; "
                                                                   "change nothing.")
        return parser

    def take_action(self, args):
        flavor_specs.placement_class(args.resource_class)  # refuse a bad name before all else
        chosen = nodes.NodeFilter.from_args(args, no_class=args.no_class)
        if not args.nodes and not chosen.given:
            raise app.UsageError("name the nodes, or select them with a filter (--no-class, "
                                 "--current-class, --name-glob, --conductor-group, --shard, "
                                 "--property)")
        ironic = wiring.ironic_client(self.app.conf)
        records, missing = self._targets(ironic, args)
        if chosen.given:
            records = chosen.select(records)
        return self._apply(ironic, records, missing, args.resource_class, args)


class Unset(_Change):
    """Remove the resource_class of the named nodes (they stop being schedulable)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        nodes.add_node_names(parser, nargs="+")
        parser.add_argument("--dry-run", action="store_true")
        return parser

    def take_action(self, args):
        ironic = wiring.ironic_client(self.app.conf)
        records, missing = self._targets(ironic, args)
        return self._apply(ironic, records, missing, None, args)


# --- the audit's capability section ---------------------------------------------------------

CAPABILITY_FINDINGS = ("capability_problem", "trait_collision", "flavor_untranslatable")


def _node_class(record):
    return model.normalize_resource_class(record.get("resource_class"))[0]


def audit_rows(records, rules, flavors=()):
    """(finding, subject, detail) rows: capability keys in use, problems, trait names two
    values share, and per flavor the nodes it matches before and after translation.

    Findings (exit 1): ``capability_problem``, ``trait_collision``,
    ``flavor_untranslatable``; ``capability`` and ``flavor`` rows are information.
    """
    rows = []
    values = collections.defaultdict(collections.Counter)
    nodes_with = collections.Counter()
    sources = collections.defaultdict(set)
    for record in records:
        props = record.get("properties")
        parsed, _ = traits.parse_capabilities((props or {}).get("capabilities")
                                              if isinstance(props, dict) else None)
        for key, value in parsed.items():
            values[key][value] += 1
            nodes_with[key] += 1
            trait, _ = traits.capability_trait(rules, key, value)
            if trait:
                sources[trait].add(f"{key}={value}")
        for problem in traits.derive_problems(rules, props):
            rows.append(("capability_problem", record["uuid"], problem))
    for key in sorted(values):
        shown = ", ".join(f"{v} ({n})" for v, n in sorted(values[key].items())[:20])
        more = len(values[key]) - 20
        rule = rules.capability_rule(key)
        state = ("translated by the rules" if rule is not None and rule.values is None else
                 f"translated for {', '.join(sorted(rule.values))}" if rule is not None else
                 "not in the rules")
        rows.append(("capability", key, f"{nodes_with[key]} nodes: {shown}"
                                        f"{f' and {more} more' if more > 0 else ''}; {state}"))
    for trait in sorted(t for t, s in sources.items() if len(s) > 1):
        rows.append(("trait_collision", trait, " and ".join(sorted(sources[trait]))
                     + " give the same trait: a translated flavor would match both"))
    for name, specs in flavors:
        t = traits.translate_flavor(rules, specs)
        required = {k[len("trait:"):] for k, v in t.specs.items()
                    if k.startswith("trait:") and v == "required"}
        forbidden = {k[len("trait:"):] for k, v in t.specs.items()
                     if k.startswith("trait:") and v == "forbidden"}
        rc = flavor_specs.flavor_class(specs)
        in_class = [r for r in records if rc is None or _node_class(r) == rc]
        before = sum(1 for r in in_class if traits.capabilities_match(specs, r.get("properties")))
        after = sum(1 for r in in_class
                    if required <= set(r.get("traits") or ())
                    and not forbidden & set(r.get("traits") or ()))
        detail = (f"before {before} nodes (ComputeCapabilitiesFilter), after {after} nodes "
                  f"(traits on the nodes now); class {rc or '(any)'}; required "
                  f"{' '.join(sorted(required)) or '(none)'}")
        rows.append(("flavor", name, detail))
        for key, value, reason in t.untranslated:
            rows.append(("flavor_untranslatable", name, f"{key}={value}: {reason}"))
    return rows


def capability_audit(conf, rules_path=None, flavor_paths=()):
    """The capability rows of ``resource-class audit`` over the nodes in scope."""
    rules = app.resolve_rules(rules_path, conf)
    flavors = [f for path in flavor_paths for f in flavor_specs.load_flavors(path)]
    records = wiring.ironic_client(conf).list_nodes(extra_fields=capability_traits.FIELDS)
    return audit_rows(records, rules, flavors)


class Audit(app.CommandMixin, lister.Lister):
    """Nodes without a class, drift between the model and Placement, classes in use, and
    spellings that normalize to one class; capability keys in use (``capability``),
    malformed capabilities (``capability_problem``), two values giving one trait
    (``trait_collision``) and, per --flavor-json, how many nodes the flavor matches
    before and after translation (``flavor``, ``flavor_untranslatable``).
    Exit 0 when clean, 1 when it found something."""

    FINDINGS = ("unclassified", "invalid_class", "invalid_node", "drift", "stale_provider",
                "absent_node", "deletion_refused", "spellings") + CAPABILITY_FINDINGS

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--flavor-json", metavar="FILE", action="append", default=[],
                            help="The JSON of `openstack flavor show -f json`: how many nodes "
                                 "it matches before (capabilities) and after (traits) "
                                 "translation (repeatable).")
        app.add_rules_option(parser)
        return parser

    def take_action(self, args):
        app.resolve_rules(args.rules, self.app.conf)  # a bad file: before any reading
        for path in args.flavor_json:
            flavor_specs.load_flavors(path)
        summary = wiring.reconciler(self.app.conf).run(dry_run=True, progress=nodes.Progress())
        rows = []
        for r in sorted(summary.results, key=lambda r: r.uuid):
            if r.outcome is Outcome.SKIPPED:
                kind = ("unclassified" if r.reason == "node has no resource_class" else
                        "invalid_node" if r.reason.startswith("invalid node record") else
                        "invalid_class")
                rows.append((kind, r.uuid, r.reason))
            if r.outcome is Outcome.FAILED:
                rows.append(("error", r.uuid, r.reason))
            elif r.outcome is Outcome.DELETED:
                rows.append(("stale_provider", r.uuid, r.reason))
            elif r.outcome is Outcome.KEPT:
                rows.append(("absent_node", r.uuid, r.reason))
            elif r.ops:
                rows.append(("drift", r.uuid, plans.describe_ops(r)))
        if summary.deletion_refused:
            self.warn(f"deletion refused: {summary.deletion_refused}")
            rows.append(("deletion_refused", "-", summary.deletion_refused))
        spellings = collections.defaultdict(set)
        for node in summary.node_views:
            rc, _ = model.normalize_resource_class(node.resource_class)
            if rc:
                spellings[rc].add(node.resource_class)
        counts = collections.Counter(
            model.normalize_resource_class(n.resource_class)[0] for n in summary.node_views)
        for rc in sorted(spellings):
            rows.append(("class_in_use", rc, f"{counts[rc]} nodes"))
            if len(spellings[rc]) > 1:
                rows.append(("spellings", rc, " ".join(repr(s) for s in sorted(spellings[rc]))
                             + f" all normalize to {rc}"))
        rows += capability_audit(self.app.conf, args.rules, args.flavor_json)
        if any(row[0] in self.FINDINGS or row[0] == "error" for row in rows):
            self.exit_code = app.EXIT_FAILED
        return ("finding", "subject", "detail"), rows
