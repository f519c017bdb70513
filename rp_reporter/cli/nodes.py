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

"""Which nodes a command works on, and its progress over them.

The named nodes, read one by one (``lookup``), or every node in scope; narrowed by
the filters ``add_filter_options`` declares (``NodeFilter``); walked with a progress
line on a terminal (``walk``).  Shared by the commands; imports none of them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import sys

from rp_reporter.cli import app


def add_node_names(parser, nargs="*"):
    """The NODE arguments."""
    parser.add_argument("nodes", nargs=nargs, metavar="NODE", help="Node uuid or name.")


def add_filter_options(parser):
    """--name-glob, --conductor-group, --shard and --property, in that order."""
    parser.add_argument("--name-glob", metavar="GLOB", help="Only nodes whose name matches.")
    parser.add_argument("--conductor-group", metavar="GROUP")
    parser.add_argument("--shard", metavar="SHARD")
    parser.add_argument("--property", action="append", default=[], metavar="KEY=VALUE",
                        help="Only nodes with this property value (repeatable).")


@dataclasses.dataclass(frozen=True)
class NodeFilter:
    """What a node must be to be selected; a field left at its default asks nothing."""

    no_class: bool = False              # only nodes without a resource_class
    resource_class: str | None = None
    name_glob: str | None = None
    conductor_group: str | None = None
    shard: str | None = None
    properties: tuple = ()              # (key, value): str(properties[key]) == value

    @classmethod
    def from_args(cls, args, no_class=False):
        """The filter of ``add_filter_options``' options and ``args.current_class``;
        UsageError for a --property without '=' (a later KEY wins over an earlier)."""
        if any("=" not in p for p in args.property):
            raise app.UsageError("--property takes KEY=VALUE")
        return cls(no_class=no_class, resource_class=args.current_class,
                   name_glob=args.name_glob, conductor_group=args.conductor_group,
                   shard=args.shard,
                   properties=tuple(dict(p.split("=", 1) for p in args.property).items()))

    @property
    def given(self):
        """Whether the operator asked for any filter (an empty string asks for none)."""
        return bool(self.no_class or self.resource_class or self.name_glob
                    or self.conductor_group or self.shard or self.properties)

    def matches(self, record):
        props = record.get("properties") or {}
        return ((not self.no_class or not record.get("resource_class"))
                and (self.resource_class is None
                     or record.get("resource_class") == self.resource_class)
                and (self.name_glob is None or fnmatch.fnmatch(record.get("name") or "",
                                                               self.name_glob))
                and (self.conductor_group is None
                     or (record.get("conductor_group") or "") == self.conductor_group.lower())
                and (self.shard is None or record.get("shard") == self.shard)
                and all(str(props.get(k)) == v for k, v in self.properties))

    def select(self, records):
        return [r for r in records if self.matches(r)]


def lookup(ironic, idents, extra_fields=()):
    """(ident, record) for each named node in turn, one read each; the record is None
    where Ironic knows no such node."""
    for ident in idents:
        yield ident, ironic.get_node(ident, extra_fields=extra_fields)


def named_or_all(ironic, idents, extra_fields=()):
    """(records, missing): the named nodes and the names Ironic does not know; with no
    names, every node in scope (and none missing)."""
    if not idents:
        return ironic.list_nodes(extra_fields=extra_fields), []
    records, missing = [], []
    for ident, record in lookup(ironic, idents, extra_fields):
        if record is None:
            missing.append(ident)
        else:
            records.append(record)
    return records, missing


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


def walk(records):
    """Each record in turn; the Progress line counts it once the caller is done with it."""
    progress = Progress()
    for done, record in enumerate(records, 1):
        yield record
        progress(done, len(records))
