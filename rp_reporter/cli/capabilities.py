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

"""``rp-reporter traits from-capabilities`` and ``rp-reporter flavor translate``: node
capabilities as traits on the Ironic nodes, and flavors' capability specs as trait specs."""

from cliff import lister

from rp_reporter import errors
from rp_reporter import traits
from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli import flavor_specs
from rp_reporter.cli import nodes
from rp_reporter.sync import capability_traits


def _rules_for(command, args):
    """The rules, reading the configuration only when one was given (translate works
    without any)."""
    options = command.app.options
    conf = command.app.conf if (options.config_file or options.config_dir) else None
    return app.resolve_rules(args.rules, conf)


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
        rc = flavor_specs.placement_class(args.resource_class) if args.resource_class else None
        flavors = []
        if args.specs:
            flavors.append(("-", flavor_specs.spec_pairs(args.specs)))
        for path in args.flavor_json:
            flavors.extend(flavor_specs.load_flavors(path))
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
        nodes.add_node_names(parser)
        parser.add_argument("--dry-run", action="store_true",
                            help="Show what would change; write nothing.")
        app.add_rules_option(parser)
        parser.add_argument("--resource-class", dest="current_class", metavar="NAME",
                            help="Only nodes of this resource_class.")
        nodes.add_filter_options(parser)
        return parser

    def take_action(self, args):
        rules = app.resolve_rules(args.rules, self.app.conf)  # before anything is read or written
        chosen = nodes.NodeFilter.from_args(args)
        ironic = wiring.ironic_client(self.app.conf)
        step = capability_traits.NodeTraits(ironic, rules)
        records, missing = nodes.named_or_all(ironic, args.nodes,
                                              extra_fields=capability_traits.FIELDS)
        rows = [(ident, "", "", "", "failed: no such node", "") for ident in missing]
        for record in nodes.walk(chosen.select(records)):
            rows.append(self._one(step, record, args.dry_run))
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
