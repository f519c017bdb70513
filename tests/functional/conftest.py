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

"""Fixtures that start the real services once per session (never skipped:
a service that cannot start is an error, not a skip)."""

import itertools
import json
import subprocess
import sys

import pytest

from rp_reporter import conf as rp_conf
from rp_reporter import wiring
from tests.functional import agents as agent_helpers
from tools import clients
from tools import localstack

_shards = itertools.count()


def running_stack(tmp_path_factory, **shape):
    """The stack of this shape (localstack.LocalStack's knobs), started for the session;
    tests/keystone's ``stack`` is this with the production preset."""
    s = localstack.LocalStack(str(tmp_path_factory.mktemp("stack")), **shape)
    try:
        s.start()
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory)


@pytest.fixture
def shard(request):
    # Each test gets its own Ironic shard, and the reporter is scoped to it,
    # so tests share one stack without seeing each other's nodes.
    return f"t{next(_shards)}-{request.node.name[:40]}".replace("[", "-").replace("]", "")


@pytest.fixture
def ironic(stack, shard, placement):
    helper = clients.Ironic(stack.ironic_url, shard, auth=stack.admin_auth("baremetal"))
    yield helper
    # Providers of nodes a test deleted go with it: the next test's reporter would
    # count them as nodes gone from Ironic (and its deletion guard would refuse).
    placement.remove_providers(helper.deleted)


@pytest.fixture
def placement(stack):
    return clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"))


@pytest.fixture
def conf_file(stack, shard, tmp_path):
    path = tmp_path / "rp_reporter.conf"
    path.write_text(stack.reporter_conf(ironic={"shard": shard}, placement={"request_attempts": 8}))
    return str(path)


@pytest.fixture
def reporter_conf(conf_file):
    return rp_conf.load(["--config-file", conf_file])


@pytest.fixture
def reconciler(reporter_conf):
    return wiring.reconciler(reporter_conf)


@pytest.fixture
def agents(stack, shard, tmp_path):
    """Start rp-reporter-agent processes in this test's shard; all killed afterwards."""
    yield from agent_helpers.agents_fixture(stack, shard, tmp_path)


@pytest.fixture
def write_conf(stack, shard, tmp_path):
    """Write a config file for this test's shard, ``sections`` over the stack's defaults;
    returns its path (for ``cli(..., config_file=path)``)."""
    def write(name="custom", **sections):
        sections.setdefault("ironic", {})["shard"] = shard
        path = tmp_path / f"{name}.conf"
        path.write_text(stack.reporter_conf(**sections))
        return str(path)
    return write


def run_json(cli, *args, **kwargs):
    """``cli(ARGS -f json)``: (exit status, parsed rows or None, stderr)."""
    code, out, err = cli(*args, "-f", "json", **kwargs)
    return code, (json.loads(out) if out.strip() else None), err


@pytest.fixture
def cli(conf_file):
    """Run ``rp-reporter --config-file <test conf> ARGS`` as a process; (exit, stdout, stderr)."""
    def run(*args, config_file=conf_file):
        proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli",
                               "--config-file", config_file, *args],
                              capture_output=True, text=True, timeout=300)
        return proc.returncode, proc.stdout, proc.stderr
    return run
