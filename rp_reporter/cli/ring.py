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

"""``rp-reporter ring show``: the members, their liveness and their share of the nodes."""

from cliff import lister

from rp_reporter import membership
from rp_reporter import model
from rp_reporter import wiring
from rp_reporter.cli import app


class RingShow(app.CommandMixin, lister.Lister):
    """Show the ring's members with liveness and node counts; --nodes: each node's owner."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--nodes", action="store_true",
                            help="One row per node: its uuid and the owning host.")
        return parser

    def take_action(self, parsed_args):
        conf = self.app.conf
        members, liveness = membership.live_members(conf)
        if not members:
            raise app.UsageError(f"no live members in group {conf.coordination.group!r}")
        ring = wiring.ring(conf, members)
        nodes = []
        for record in wiring.ironic_client(conf).list_nodes():
            try:
                nodes.append(model.node_from_api(record).uuid)
            except model.InvalidNode:
                continue
        if parsed_args.nodes:
            return ("node", "owner"), [(n, ring.owner(n)) for n in sorted(nodes)]
        loads = ring.loads(nodes)
        return (("member", "liveness", "nodes"),
                [(m, liveness, loads[m]) for m in sorted(members)])
