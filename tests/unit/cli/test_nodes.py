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

"""rp_reporter.cli.nodes: which nodes a command works on, and the progress over them."""

import argparse
import io

import pytest

from rp_reporter.cli import app
from rp_reporter.cli import nodes

GOLD = {"uuid": "u1", "name": "rack9-a", "resource_class": "gold", "conductor_group": "cg1",
        "shard": "s1", "properties": {"memory_mb": 262144}}
BARE = {"uuid": "u2", "name": None, "resource_class": None, "conductor_group": None,
        "shard": None}


def parsed(*argv):
    parser = argparse.ArgumentParser()
    nodes.add_node_names(parser)
    parser.add_argument("--current-class")
    nodes.add_filter_options(parser)
    return parser.parse_args(argv)


@pytest.mark.parametrize("argv, no_class, selected", [
    ((), False, ["u1", "u2"]),
    ((), True, ["u2"]),
    (("--current-class", "gold"), False, ["u1"]),
    (("--name-glob", "rack9-*"), False, ["u1"]),
    (("--conductor-group", "CG1"), False, ["u1"]),        # Ironic keeps groups lower case
    (("--conductor-group", ""), False, ["u2"]),
    (("--shard", "s1"), False, ["u1"]),
    (("--property", "memory_mb=262144"), False, ["u1"]),
    (("--property", "memory_mb=1", "--property", "memory_mb=262144"), False, ["u1"]),  # last wins
])
def test_the_filter_selects(argv, no_class, selected):
    chosen = nodes.NodeFilter.from_args(parsed(*argv), no_class=no_class)
    assert [r["uuid"] for r in chosen.select([GOLD, BARE])] == selected


def test_an_empty_string_is_no_filter_given_and_a_bad_property_is_refused():
    assert not nodes.NodeFilter.from_args(parsed("--conductor-group", "")).given
    assert nodes.NodeFilter.from_args(parsed(), no_class=True).given
    with pytest.raises(app.UsageError, match="--property takes KEY=VALUE"):
        nodes.NodeFilter.from_args(parsed("--property", "memory_mb"))


class FakeIronic:
    def __init__(self):
        self.calls = []

    def get_node(self, ident, extra_fields=()):
        self.calls.append(("get", ident, extra_fields))
        return {"uuid": ident} if ident.startswith("u") else None

    def list_nodes(self, extra_fields=()):
        self.calls.append(("list", extra_fields))
        return [{"uuid": "u9"}]


def test_named_nodes_are_read_one_by_one_and_the_missing_named():
    ironic = FakeIronic()
    records, missing = nodes.named_or_all(ironic, ["u1", "nope", "u2"], extra_fields=("x",))
    assert records == [{"uuid": "u1"}, {"uuid": "u2"}] and missing == ["nope"]
    assert ironic.calls == [("get", "u1", ("x",)), ("get", "nope", ("x",)), ("get", "u2", ("x",))]


def test_no_names_list_every_node():
    ironic = FakeIronic()
    assert nodes.named_or_all(ironic, [], extra_fields=("x",)) == ([{"uuid": "u9"}], [])
    assert ironic.calls == [("list", ("x",))]


def test_lookup_reads_lazily():
    ironic = FakeIronic()
    looked = nodes.lookup(ironic, ["nope", "u1"])
    assert next(looked) == ("nope", None) and len(ironic.calls) == 1


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_only():
    tty = Tty()
    progress = nodes.Progress(tty)
    for done in range(1, 201):
        progress(done, 200)
    assert tty.getvalue() == "\r100/200 nodes\r200/200 nodes\n"
    piped = io.StringIO()
    nodes.Progress(piped)(1, 1)
    assert piped.getvalue() == ""


def test_walk_yields_every_record_in_order(monkeypatch):
    seen = []
    monkeypatch.setattr(nodes, "Progress", lambda: lambda done, total: seen.append(done))
    assert list(nodes.walk(["a", "b"])) == ["a", "b"]
    assert seen == [1, 2]
