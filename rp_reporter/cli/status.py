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

"""``rp-reporter status [NODE...]``: Ironic's state, the desired provider, what
Placement holds, and which agent owns the node.  ``--explain`` says, for the
named nodes, every rule that decides the provider, in words (rp_reporter.explain)."""

from cliff import lister

from rp_reporter import explain
from rp_reporter import membership
from rp_reporter import model
from rp_reporter import tenancy
from rp_reporter import wiring
from rp_reporter.cli import app
from rp_reporter.cli import nodes
from rp_reporter.sync import plan as planner


def _class_and_reserved(inventories):
    return (" ".join(sorted(inventories)),
            " ".join(str(inventories[rc]["reserved"]) for rc in sorted(inventories)))


def _may_deploy(node, options):
    """Who may deploy on the node ([tenancy]): its projects, or "public"."""
    claim = tenancy.claim_on(node, options.rule, frozenset(options.public_owners))
    return " ".join(sorted(claim.projects)) or "public"


class Status(app.CommandMixin, lister.Lister):
    """One row per node (all nodes in scope when none is named); with [tenancy]
    enabled, who may deploy on it (``may_deploy``)."""

    COLUMNS = ("node", "name", "provision_state", "power_state", "maintenance", "instance",
               "desired_class", "desired_reserved", "placement_class", "placement_reserved",
               "in_step", "owner")
    EXPLAIN_COLUMNS = ("node", "rule", "explanation")

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        nodes.add_node_names(parser)
        parser.add_argument("--explain", action="store_true",
                            help="For each NODE, every rule that decides its provider, in "
                                 "words: one row per rule (node, rule, explanation).")
        return parser

    def _nothing_visible(self, ironic, placement):
        """No node in scope: say plainly whether that is a fleet or a view problem."""
        held = len(placement.list_providers())
        if held:
            self.warn(f"Ironic shows no nodes in scope while Placement holds {held} managed "
                      f"providers: the [ironic] credentials, conductor_group, shard or "
                      f"endpoint are wrong" + (f" ({ironic.listing_gap})"
                                               if ironic.listing_gap else ""))
            self.exit_code = app.EXIT_FAILED
        else:
            self.warn("Ironic shows no nodes in scope, and Placement holds no managed provider")

    def take_action(self, args):
        if args.explain and not args.nodes:
            raise app.UsageError("--explain needs the nodes to explain (NODE ...)")
        conf = self.app.conf
        ironic = wiring.ironic_client(conf)
        placement = wiring.placement_client(conf)
        extra_fields = tenancy.FIELDS if conf.tenancy.enabled else ()
        if args.nodes:
            records = []
            for ident, record in nodes.lookup(ironic, args.nodes, extra_fields):
                if record is None:
                    note = ironic.scope_note()
                    raise app.UsageError(f"no such node in Ironic: {ident}" + (
                        f" (or the credentials cannot see it: {note})" if note else ""))
                records.append(record)
        else:
            records = ironic.list_nodes(extra_fields)
            if not records:
                self._nothing_visible(ironic, placement)
        members, how = membership.live_members(conf)
        ring = wiring.ring(conf, members) if members else None
        rows = []
        for record in records:
            try:
                node = model.node_from_api(record)
            except model.InvalidNode as e:
                if args.explain:
                    rows.append((str(record.get("uuid")), "invalid",
                                 f"the record cannot be read ({e}): no provider is written "
                                 f"for it (one log line; sync failures, invalid_node)"))
                    continue
                rows.append((str(record.get("uuid")), "", "", "", "", "", f"invalid: {e}",
                             "", "", "", "", "") + (("",) if conf.tenancy.enabled else ()))
                continue
            desired = model.desired(node, skip_reserve_in_use=conf.reconcile.skip_reserve_in_use)
            observed = placement.observe(node.uuid, aggregates=conf.tenancy.enabled)
            if planner.needs_usages(desired, observed):
                observed = observed.with_usages(placement.usages(node.uuid))
            if args.explain:
                scope = explain.Scope(
                    host=conf.host, owner=ring.owner(node.uuid) if ring else None,
                    membership=how, conductor_group=conf.ironic.conductor_group,
                    shard=conf.ironic.shard,
                    skip_reserve_in_use=conf.reconcile.skip_reserve_in_use,
                    tenancy_rule=conf.tenancy.rule if conf.tenancy.enabled else None,
                    public_owners=frozenset(conf.tenancy.public_owners))
                rows.extend((node.uuid, topic, text)
                            for topic, text in explain.explain(node, observed, scope))
                continue
            want_rc, want_reserved = _class_and_reserved(desired.inventories)
            have_rc, have_reserved = (_class_and_reserved(observed.inventories) if observed
                                      else ("(no provider)", ""))
            rows.append((node.uuid, node.name or "", node.provision_state or "",
                         node.power_state or "", node.maintenance, node.instance_uuid or "",
                         want_rc or f"(none: {desired.problem})", want_reserved,
                         have_rc, have_reserved, planner.plan(desired, observed) == (),
                         ring.owner(node.uuid) if ring else "(no live agent)")
                        + ((_may_deploy(node, conf.tenancy),) if conf.tenancy.enabled else ()))
        if args.explain:
            return self.EXPLAIN_COLUMNS, rows
        return self.COLUMNS + (("may_deploy",) if conf.tenancy.enabled else ()), rows
