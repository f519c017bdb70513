"""``rp-reporter traits from-capabilities`` and ``rp-reporter flavor translate``: node
capabilities as traits on the Ironic nodes, and flavors' capability specs as trait specs.

Also the capability part of ``rp-reporter resource-class audit`` (``audit_rows``).
"""

import argparse
import collections
import json
import re
import sys

from cliff import lister

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import traits
from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli.reconcile import Progress
from rp_reporter.cli.resource_class import _matches
from rp_reporter.cli.resource_class import placement_class
from rp_reporter.sync import capability_traits

FLAVOR_JSON_MAX = 4 * 1024 * 1024


def resolve_rules(rules_path, conf=None):
    """--rules FILE, else ``[traits] rules_file``, else the built-in rules; a bad file
    is a UsageError (one line, exit 2, nothing written)."""
    path = rules_path or (conf.traits.rules_file if conf is not None else None)
    if not path:
        return traits.DEFAULT_RULES
    try:
        return traits.load_rules(path)
    except traits.RulesError as e:
        raise app.UsageError(f"bad rule file: {e}") from None


def _rules_for(command, args):
    """The rules, reading the configuration only when one was given (translate works
    without any)."""
    options = command.app.options
    conf = command.app.conf if (options.config_file or options.config_dir) else None
    return resolve_rules(args.rules, conf)


# --- flavor JSON ---------------------------------------------------------------------------

_OLD_PROPERTY = re.compile(r"([^=,\s][^=]*?)='(.*?)'(?=, [^=,\s][^=]*?='|\s*$)", re.S)


def parse_properties(value, source):
    """A flavor's extra specs from ``openstack flavor show -f json``'s "properties":
    a mapping, or (older clients) a string ``key='value', key2='value2'``."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, str):
        specs, end = {}, 0
        for m in _OLD_PROPERTY.finditer(value):
            if value[end:m.start()].strip(", ") != "":
                break
            specs[m.group(1).strip()] = m.group(2)
            end = m.end()
        if value[end:].strip(", "):
            raise app.UsageError(f"{source}: cannot read properties from "
                                 f"{value[end:end + 60]!r} (want key='value', ...)")
        return specs
    raise app.UsageError(f"{source}: properties is a {type(value).__name__}, want a mapping "
                         "or a string")


def load_flavors(path):
    """[(name, extra specs)] from a file (``-``: stdin) holding the JSON of ``openstack
    flavor show -f json`` (or a list of such objects)."""
    source = "stdin" if path == "-" else path
    try:
        if path == "-":
            text = sys.stdin.read(FLAVOR_JSON_MAX + 1)
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read(FLAVOR_JSON_MAX + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise app.UsageError(f"{source}: {getattr(e, 'strerror', None) or e}") from None
    if len(text) > FLAVOR_JSON_MAX:
        raise app.UsageError(f"{source}: more than {FLAVOR_JSON_MAX} bytes")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise app.UsageError(f"{source}: not JSON ({e})") from None
    docs = doc if isinstance(doc, list) else [doc]
    flavors = []
    for i, item in enumerate(docs):
        if not isinstance(item, dict):
            raise app.UsageError(f"{source}: [{i}] is not a flavor object")
        specs = item.get("properties", item.get("extra_specs"))
        name = str(item.get("name") or item.get("id") or f"{source}[{i}]")
        flavors.append((name, parse_properties(specs, source)))
    return flavors


def spec_pairs(pairs):
    specs = {}
    for pair in pairs:
        if "=" not in pair:
            raise app.UsageError(f"{pair!r}: want KEY=VALUE")
        key, value = pair.split("=", 1)
        specs[key] = value
    return specs


class FlavorTranslate(app.CommandMixin, lister.Lister):
    """Print the trait and resource specs equivalent to a flavor's capability specs.

    Each row is one spec of the translated flavor: ``translated`` (a required trait
    from a capability spec, named in detail), ``kept`` (specs the capabilities
    filter ignores: resources:, trait:, hw:, ...), ``added`` (resources:VCPU,
    MEMORY_MB and DISK_GB at 0, and the class given with --resource-class), or
    ``untranslatable`` (the original spec, with why).  Exit 0 when every spec
    translated, 1 when any is untranslatable, 2 for a bad rule file or input.
    """

    COLUMNS = ("flavor", "spec", "value", "status", "detail")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("specs", nargs="*", metavar="KEY=VALUE",
                            help="Extra specs, e.g. capabilities:boot_mode=uefi.")
        parser.add_argument("--flavor-json", metavar="FILE", action="append", default=[],
                            help="The JSON of `openstack flavor show -f json` (- for stdin); "
                                 "repeatable.")
        app.add_rules_option(parser)
        parser.add_argument("--resource-class", metavar="NAME",
                            help="Add resources:CUSTOM_<NAME>=1 when the flavor asks for no "
                                 "custom class.")
        return parser

    def take_action(self, args):
        rules = _rules_for(self, args)
        rc = placement_class(args.resource_class) if args.resource_class else None
        flavors = []
        if args.specs:
            flavors.append(("-", spec_pairs(args.specs)))
        for path in args.flavor_json:
            flavors.extend(load_flavors(path))
        if not flavors:
            raise app.UsageError("give KEY=VALUE specs or --flavor-json FILE")
        rows = []
        for name, specs in flavors:
            t = traits.translate_flavor(rules, specs, resource_class=rc)
            sources = {f"trait:{trait}": f"from {key}={value}"
                       for key, value, trait in t.translated}
            for key, value in t.specs.items():
                if key in sources:
                    rows.append((name, key, value, "translated", sources[key]))
                elif key in specs and specs[key] == value:
                    rows.append((name, key, value, "kept", ""))
                else:
                    rows.append((name, key, value, "added", ""))
            for key, value, reason in t.untranslated:
                rows.append((name, key, value, "untranslatable", reason))
                self.warn(f"{name}: {key}={value}: cannot translate: {reason}")
        if any(r[3] == "untranslatable" for r in rows):
            self.exit_code = app.EXIT_FAILED
        return self.COLUMNS, rows


# --- traits from-capabilities ----------------------------------------------------------------

class TraitsFromCapabilities(app.CommandMixin, lister.Lister):
    """Set on the Ironic nodes the traits their capabilities and properties derive.

    Adds each derived trait the node lacks and removes the ones this command (or the
    agent) derived earlier and no longer derives; a trait it did not add (set by hand,
    or there before it was derived) is never removed.  What it added is recorded in the
    node's extra/rp_reporter_derived_traits.  Without NODEs or filters: every node in
    scope.  Exit 0 done, 1 some node failed (listed), 2 bad rule file or configuration
    (nothing written).
    """

    COLUMNS = ("node", "name", "added", "removed", "result", "problems")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("nodes", nargs="*", metavar="NODE", help="Node uuid or name.")
        parser.add_argument("--dry-run", action="store_true",
                            help="Show what would change; write nothing.")
        app.add_rules_option(parser)
        parser.add_argument("--resource-class", dest="current_class", metavar="NAME",
                            help="Only nodes of this resource_class.")
        parser.add_argument("--name-glob", metavar="GLOB", help="Only nodes whose name matches.")
        parser.add_argument("--conductor-group", metavar="GROUP")
        parser.add_argument("--shard", metavar="SHARD")
        parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                            help="Only nodes with this property value (repeatable).")
        return parser

    def take_action(self, args):
        rules = resolve_rules(args.rules, self.app.conf)  # before anything is read or written
        if any("=" not in p for p in args.property):
            raise app.UsageError("--property takes KEY=VALUE")
        ironic = wiring.ironic_client(self.app.conf)
        step = capability_traits.NodeTraits(ironic, rules)
        rows, records = [], []
        if args.nodes:
            for ident in args.nodes:
                record = ironic.get_node(ident, extra_fields=capability_traits.FIELDS)
                if record is None:
                    rows.append((ident, "", "", "", "failed: no such node", ""))
                else:
                    records.append(record)
        else:
            records = ironic.list_nodes(extra_fields=capability_traits.FIELDS)
        filters = argparse.Namespace(no_class=False, current_class=args.current_class,
                                     name_glob=args.name_glob,
                                     conductor_group=args.conductor_group, shard=args.shard,
                                     property=args.property)
        records = [r for r in records if _matches(r, filters)]
        progress = Progress()
        for done, record in enumerate(records, 1):
            rows.append(self._one(step, record, args.dry_run))
            progress(done, len(records))
        if any(r[4].startswith("failed") for r in rows):
            self.exit_code = app.EXIT_FAILED
        return self.COLUMNS, rows

    def _one(self, step, record, dry_run):
        uuid = record["uuid"]
        problems = step.problems(record)
        for problem in problems:
            self.warn(f"node {uuid}: {problem}")
        try:
            changes = step.apply(record, dry_run=dry_run)
            result = ("unchanged" if not changes.changed else
                      "would change" if dry_run else "changed")
            added, removed = changes.add, changes.remove
        except errors.ServiceError as e:
            if e.kind in (errors.DENIED, errors.MISCONFIGURED):
                raise  # the same for every node: one line, exit 2
            added = removed = ()
            result = f"failed: {e}"
        return (uuid, record.get("name") or "", " ".join(sorted(added)),
                " ".join(sorted(removed)), result, "; ".join(problems))


# --- the audit's capability section ---------------------------------------------------------

def _node_class(record):
    return model.normalize_resource_class(record.get("resource_class"))[0]


def _flavor_class(specs):
    return next((k[len("resources:"):] for k, v in specs.items()
                 if k.startswith("resources:CUSTOM_") and str(v).strip() == "1"), None)


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
        rc = _flavor_class(specs)
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


AUDIT_FINDINGS = ("capability_problem", "trait_collision", "flavor_untranslatable")


def audit(conf, rules_path=None, flavor_paths=()):
    """The capability rows of ``resource-class audit`` over the nodes in scope."""
    rules = resolve_rules(rules_path, conf)
    flavors = [f for path in flavor_paths for f in load_flavors(path)]
    records = wiring.ironic_client(conf).list_nodes(extra_fields=capability_traits.FIELDS)
    return audit_rows(records, rules, flavors)
