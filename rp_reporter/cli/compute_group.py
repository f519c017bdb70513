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

"""``rp-reporter compute-group show|forget|hold|release``: the record of a nova-compute
group (the driver's ``[coordination] group``) in the coordination backend: every service
that was ever a member, whom a mover forced down, and who is held down on purpose
(``rp_reporter.group_record``)."""

import datetime
import time

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

    def _member_record(self, parsed_args, observer):
        """GROUP's record, HOST a member of it (else a usage error)."""
        record = self._record(parsed_args.group, observer)
        if parsed_args.host.lower() not in record.members():
            raise app.UsageError(f"{parsed_args.host} is not in group "
                                 f"{parsed_args.group}'s record")
        return record

    def _observer(self):
        if not self.app.conf.coordination.backend_url:
            raise app.UsageError("[coordination] backend_url is not set: the group's record "
                                 "is in the coordination backend")
        return membership.observing(self.app.conf)


class Show(_RecordCommand, lister.Lister):
    """One row per service ever a member of GROUP: whether it is a live member now, the
    mover that forced it down (empty: none did, or its flag was cleared), the end of an
    operator's hold, and how many builds cast to it, never taken, are recorded for a
    survivor to end once it is fenced."""

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
            holds, queued = record.holds(), record.queued()
        return (("host", "live", "forced_down_by", "held_until", "queued_builds"),
                [(host, host in live, movers.get(host, ""), _held_until(holds.get(host)),
                  sum(len(servers) for servers in queued.get(host, {}).values()))
                 for host in sorted(members)])


def _held_until(until):
    """A hold's end as UTC ISO text; empty for none or one ended."""
    if until is None or until <= time.time():
        return ""
    return datetime.datetime.fromtimestamp(until, datetime.timezone.utc).isoformat()


def _host_argument(parser):
    parser.add_argument("host", help="The compute service's host, as nova names it.")
    return parser


class Forget(_RecordCommand, command.Command):
    """Remove HOST from GROUP's record (a service decommissioned for good): its servers
    are then never moved from it, and a mover's flag on it is no longer its to clear."""

    def get_parser(self, prog_name):
        return _host_argument(_group_argument(super().get_parser(prog_name)))

    def take_action(self, parsed_args):
        with self._observer() as observer:
            self._member_record(parsed_args, observer).forget(parsed_args.host)
        self.app.stdout.write(f"{parsed_args.host} removed from group "
                              f"{parsed_args.group}'s record\n")


MAX_HOLD_MINUTES = 24 * 60


class Hold(_RecordCommand, command.Command):
    """Hold HOST down on purpose (an upgrade, a reboot) for MINUTES: while it is down
    within the hold, the group's movers do not fence it and its servers stay (nova
    shows it down meanwhile, as any stopped service).  Past the hold, a service still
    down is fenced as any other.  Honoured by movers of this release and later."""

    def get_parser(self, prog_name):
        parser = _host_argument(_group_argument(super().get_parser(prog_name)))
        parser.add_argument("--minutes", type=int, default=30,
                            help=f"How long the hold lasts (1 to {MAX_HOLD_MINUTES}; "
                                 "default 30).")
        return parser

    def take_action(self, parsed_args):
        if not 1 <= parsed_args.minutes <= MAX_HOLD_MINUTES:
            raise app.UsageError(f"--minutes {parsed_args.minutes} is not in "
                                 f"1..{MAX_HOLD_MINUTES}: a hold has a bound")
        until = int(time.time()) + 60 * parsed_args.minutes
        with self._observer() as observer:
            self._member_record(parsed_args, observer).hold(parsed_args.host, until)
        self.app.stdout.write(f"{parsed_args.host} held in group {parsed_args.group} "
                              f"until {_held_until(until)}: not fenced while down\n")


class Release(_RecordCommand, command.Command):
    """End HOST's hold now (a service still down is then fenced as any other)."""

    def get_parser(self, prog_name):
        return _host_argument(_group_argument(super().get_parser(prog_name)))

    def take_action(self, parsed_args):
        with self._observer() as observer:
            self._member_record(parsed_args, observer).release(parsed_args.host)
        self.app.stdout.write(f"{parsed_args.host}'s hold in group {parsed_args.group} "
                              f"ended\n")
