"""``rp-reporter resource-class set|unset|audit``: give nodes a class, safely, and see
what is missing or out of step."""

import collections
import fnmatch

from cliff import lister

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli.reconcile import Progress
from rp_reporter.cli.reconcile import describe_ops
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync.provider import Outcome


def placement_class(name):
    """The Placement class for an operator's name, or UsageError before any write."""
    if not name or not name.strip():
        raise app.UsageError("resource class name is empty")
    if len(name) > ironic_sync.RESOURCE_CLASS_MAX:
        raise app.UsageError(f"resource class name is {len(name)} characters; Ironic takes at "
                             f"most {ironic_sync.RESOURCE_CLASS_MAX}")
    normalized, problem = model.normalize_resource_class(name)
    if problem:
        raise app.UsageError(problem)
    return normalized


def flavor_extra_specs(rc):
    """What a nova flavor needs to land on nodes of this class (and nothing else)."""
    return f"resources:{rc}=1 resources:VCPU=0 resources:MEMORY_MB=0 resources:DISK_GB=0"


def _matches(record, args):
    props = record.get("properties") or {}
    wanted_props = dict(p.split("=", 1) for p in args.property)
    return ((not args.no_class or not record.get("resource_class"))
            and (args.current_class is None or record.get("resource_class") == args.current_class)
            and (args.name_glob is None or fnmatch.fnmatch(record.get("name") or "",
                                                           args.name_glob))
            and (args.conductor_group is None
                 or (record.get("conductor_group") or "") == args.conductor_group.lower())
            and (args.shard is None or record.get("shard") == args.shard)
            and all(str(props.get(k)) == v for k, v in wanted_props.items()))


class _Change(app.CommandMixin, lister.Lister):
    """Shared by set and unset: resolve nodes, change each, list every outcome."""

    COLUMNS = ("node", "name", "before", "after", "placement_class", "flavor_extra_specs",
               "result")

    def _targets(self, ironic, args):
        if args.nodes:
            records, missing = [], []
            for ident in args.nodes:
                record = ironic.get_node(ident)
                (records.append(record) if record else missing.append(ident))
            return records, missing
        return ironic.list_nodes(extra_fields=("properties",)), []

    def _apply(self, ironic, records, missing, new_class, args):
        rc = placement_class(new_class) if new_class is not None else ""
        specs = flavor_extra_specs(rc) if rc else ""
        rows = [(ident, "", "", "", "", "", "failed: no such node") for ident in missing]
        progress = Progress()
        for done, record in enumerate(records, 1):
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
            progress(done, len(records))
        if any(r[-1].startswith("failed") for r in rows):
            self.exit_code = app.EXIT_FAILED
        return self.COLUMNS, rows


class Set(_Change):
    """Set the resource_class of the named nodes, or of every node matching the filters."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--resource-class", required=True, metavar="NAME")
        parser.add_argument("nodes", nargs="*", metavar="NODE", help="Node uuid or name.")
        parser.add_argument("--no-class", action="store_true",
                            help="Only nodes without a resource_class yet.")
        parser.add_argument("--current-class", metavar="NAME", help="Only nodes of this class.")
        parser.add_argument("--name-glob", metavar="GLOB", help="Only nodes whose name matches.")
        parser.add_argument("--conductor-group", metavar="GROUP")
        parser.add_argument("--shard", metavar="SHARD")
        parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                            help="Only nodes with this property value (repeatable).")
        parser.add_argument("--dry-run", action="store_true", help="Show before and after; "
                                                                   "change nothing.")
        return parser

    def take_action(self, args):
        placement_class(args.resource_class)  # refuse a bad name before anything else
        filters = (args.no_class or args.current_class or args.name_glob or args.conductor_group
                   or args.shard or args.property)
        if not args.nodes and not filters:
            raise app.UsageError("name the nodes, or select them with a filter (--no-class, "
                                 "--current-class, --name-glob, --conductor-group, --shard, "
                                 "--property)")
        if any("=" not in p for p in args.property):
            raise app.UsageError("--property takes KEY=VALUE")
        ironic = wiring.ironic_client(self.app.conf)
        records, missing = self._targets(ironic, args)
        if filters:
            records = [r for r in records if _matches(r, args)]
        return self._apply(ironic, records, missing, args.resource_class, args)


class Unset(_Change):
    """Remove the resource_class of the named nodes (they stop being schedulable)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("nodes", nargs="+", metavar="NODE", help="Node uuid or name.")
        parser.add_argument("--dry-run", action="store_true")
        return parser

    def take_action(self, args):
        ironic = wiring.ironic_client(self.app.conf)
        records, missing = self._targets(ironic, args)
        return self._apply(ironic, records, missing, None, args)


class Audit(app.CommandMixin, lister.Lister):
    """Nodes without a class, drift between the model and Placement, classes in use, and
    spellings that normalize to one class; capability keys in use (``capability``),
    malformed capabilities (``capability_problem``), two values giving one trait
    (``trait_collision``) and, per --flavor-json, how many nodes the flavor matches
    before and after translation (``flavor``, ``flavor_untranslatable``).
    Exit 0 when clean, 1 when it found something."""

    FINDINGS = ("unclassified", "invalid_class", "invalid_node", "drift", "stale_provider",
                "absent_node", "deletion_refused", "spellings", "capability_problem",
                "trait_collision", "flavor_untranslatable")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--flavor-json", metavar="FILE", action="append", default=[],
                            help="The JSON of `openstack flavor show -f json`: how many nodes "
                                 "it matches before (capabilities) and after (traits) "
                                 "translation (repeatable).")
        app.add_rules_option(parser)
        return parser

    def take_action(self, args):
        from rp_reporter.cli import capabilities as cli_caps  # it imports this module

        cli_caps.resolve_rules(args.rules, self.app.conf)  # a bad file: before any reading
        for path in args.flavor_json:
            cli_caps.load_flavors(path)
        summary = wiring.reconciler(self.app.conf).run(dry_run=True, progress=Progress())
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
                rows.append(("drift", r.uuid, describe_ops(r)))
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
        rows += cli_caps.audit(self.app.conf, args.rules, args.flavor_json)
        if any(row[0] in self.FINDINGS or row[0] == "error" for row in rows):
            self.exit_code = app.EXIT_FAILED
        return ("finding", "subject", "detail"), rows
