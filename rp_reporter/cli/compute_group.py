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

"""``rp-reporter compute-group show|forget``: the record of a nova-compute group (the
driver's ``[coordination] group``) in the coordination backend: every service that was
ever a member, and whom a mover forced down (``rp_reporter.group_record``)."""

from cliff import command
from cliff import lister

from rp_reporter import group_record
from rp_reporter import membership
from rp_reporter.cli import app


def _group_argument(parser):
    parser.add_argument("group", help="The compute services' [coordination] group "
                                      "(their nova.conf's, not this file's).")
    return parser


class _RecordCommand(app.CommandMixin):
    def _record(self, group, observer):
        return group_record.GroupRecord(group, membership.DurableNames(lambda: observer))

    def _observer(self):
        if not self.app.conf.coordination.backend_url:
            raise app.UsageError("[coordination] backend_url is not set: the group's record "
                                 "is in the coordination backend")
        return membership.observing(self.app.conf)


class Show(_RecordCommand, lister.Lister):
    """One row per service ever a member of GROUP: whether it is a live member now, and
    the mover that forced it down (empty: none did, or its flag was cleared)."""

    def get_parser(self, prog_name):
        return _group_argument(super().get_parser(prog_name))

    def take_action(self, parsed_args):
        with self._observer() as observer:
            record = self._record(parsed_args.group, observer)
            members, movers = record.members(), record.movers()
            try:
                live = {m.decode().lower() for m in
                        observer.get_members(parsed_args.group.encode()).get()}
            except membership.coordination.GroupNotCreated:
                live = set()
        return (("host", "live", "forced_down_by"),
                [(host, host in live, movers.get(host, "")) for host in sorted(members)])


class Forget(_RecordCommand, command.Command):
    """Remove HOST from GROUP's record (a service decommissioned for good): its servers
    are then never moved from it, and a mover's flag on it is no longer its to clear."""

    def get_parser(self, prog_name):
        parser = _group_argument(super().get_parser(prog_name))
        parser.add_argument("host", help="The compute service's host, as nova names it.")
        return parser

    def take_action(self, parsed_args):
        with self._observer() as observer:
            record = self._record(parsed_args.group, observer)
            if parsed_args.host.lower() not in record.members():
                raise app.UsageError(f"{parsed_args.host} is not in group "
                                     f"{parsed_args.group}'s record")
            record.forget(parsed_args.host)
        self.app.stdout.write(f"{parsed_args.host} removed from group "
                              f"{parsed_args.group}'s record\n")
