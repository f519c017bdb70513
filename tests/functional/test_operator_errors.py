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

"""What an operator sees when something is wrong: the preflight, the deletion guard
across runs of the one-shot CLI, the saved observations (and a wrong one repaired),
and errors that name their section.  Real services;
the Keystone-specific cases (wrong password, scoped users) are in tests/keystone."""

import json
import time

import pytest

from rp_reporter.sync import observations
from tests.functional.conftest import run_json
from tools import localstack
from tools.wait import wait_for

pytestmark = pytest.mark.functional


def test_check_passes_where_the_reporter_can_do_its_whole_job(cli, ironic):
    ironic.create()
    code, rows, err = run_json(cli, "check")
    results = {r["check"]: r["result"] for r in rows}
    assert code == 0, err
    assert set(results) == {"ironic endpoint", "placement endpoint", "placement microversion",
                            "placement writes", "placement reshaper", "placement listing",
                            "ironic listing", "nodes against providers", "notifications",
                            "coordination"}
    assert set(results.values()) == {"ok"}, rows


def test_check_fails_and_names_what_is_unreachable(write_conf, cli):
    closed = localstack.free_port()
    conf = write_conf(notifications={"transport_url": f"rabbit://guest:guest@127.0.0.1:{closed}/"},
                      ironic={"endpoint_override": f"http://127.0.0.1:{closed}"})
    code, rows, _ = run_json(cli, "check", config_file=conf)
    failed = {r["check"]: r["detail"] for r in rows if r["result"] == "FAIL"}
    assert code == 1  # unreachable only: an outage, not configuration
    assert "ironic listing" in failed and failed["ironic listing"].startswith("[ironic]")
    assert failed["notifications"].startswith("[notifications] transport_url")
    assert "placement writes" not in failed


def test_one_shot_reconcile_deletes_only_on_a_second_run_an_interval_later(
        write_conf, tmp_path, cli, ironic, placement):
    conf = write_conf(DEFAULT={"state_path": str(tmp_path / "state")},
                      reconcile={"interval": 1})
    keep, gone = ironic.create_many(2)
    assert cli("reconcile", config_file=conf)[0] == 0
    ironic.delete(gone)
    code, rows, _ = run_json(cli, "reconcile", "--dry-run", config_file=conf)
    assert code == 0 and [r["operation"] for r in rows if r["node"] == gone] == ["kept"]
    code, (summary,), _ = run_json(cli, "reconcile", config_file=conf)
    assert code == 0 and (summary["kept"], summary["deleted"]) == (1, 0)
    assert placement.provider(gone) is not None
    time.sleep(1)
    code, (summary,), _ = run_json(cli, "reconcile", config_file=conf)
    assert code == 0 and (summary["kept"], summary["deleted"]) == (0, 1)
    assert placement.provider(gone) is None and placement.provider(keep) is not None


def test_without_a_state_path_the_one_shot_run_never_deletes(write_conf, cli, ironic,
                                                              placement):
    conf = write_conf(reconcile={"interval": 1})
    node = ironic.create()
    assert cli("reconcile", config_file=conf)[0] == 0
    ironic.delete(node)
    for _ in range(2):
        code, (summary,), _ = run_json(cli, "reconcile", config_file=conf)
        assert code == 0 and summary["deleted"] == 0
        time.sleep(1)
    assert placement.provider(node) is not None


def test_keystone_unreachable_is_one_line_naming_the_section(write_conf, cli):
    closed = localstack.free_port()
    conf = write_conf(placement={
        "auth_type": "password", "auth_url": f"http://127.0.0.1:{closed}/v3",
        "username": "rp", "password": "x", "user_domain_name": "Default",
        "project_name": "service", "project_domain_name": "Default", "endpoint": "",
        "token": "", "request_attempts": 1})
    code, out, err = cli("reconcile", config_file=conf)
    (line,) = err.strip().splitlines()
    assert code == 1 and line.startswith("rp-reporter: error: [placement]"), err
    assert f"127.0.0.1:{closed}" in line


def test_the_agent_starts_and_says_why_while_a_service_is_unreachable(agents):
    closed = localstack.free_port()
    agent = agents(name="blind", wait_healthy=False,
                   ironic={"endpoint_override": f"http://127.0.0.1:{closed}"})
    wait_for(lambda: "[ironic]" in agent.health()[1], 15, "/healthz naming [ironic]")
    assert agent.health()[0] == 503 and agent.proc.poll() is None
    assert "Ironic unavailable, retrying until it returns: [ironic]" in agent.output()


def saved_document(state_dir):
    (path,) = state_dir.iterdir()
    return path, json.loads(path.read_text())


def test_a_new_process_starts_from_saved_observations_and_a_wrong_one_is_repaired(
        write_conf, tmp_path, cli, ironic, placement):
    period = 4
    state_dir = tmp_path / "state"
    conf = write_conf(DEFAULT={"state_path": str(state_dir)},
                      reconcile={"reverify_passes": period})
    node = ironic.create()
    assert cli("reconcile", config_file=conf)[0] == 0
    # A new process with nothing changed: the provider listing, and no provider read
    # unless this pass's share of re-reads includes the node.
    code, (summary,), _ = run_json(cli, "reconcile", config_file=conf)
    _, document = saved_document(state_dir)
    reread = observations.due(node, document["values"]["observations"]["pass"], period)
    assert code == 0 and summary["unchanged"] == 1
    assert summary["placement_requests"] == {"GET": 1 + 2 * reread}
    # Behind the cache's back: Placement changes, and the saved entry claims the new
    # generation with the old content (what a provider deleted and created again at
    # the same generation looks like).
    placement.add_trait(node, "CUSTOM_FOREIGN")
    path, document = saved_document(state_dir)
    saved = document["values"]["observations"]
    saved["entries"][node][0] = placement.provider(node)["generation"]
    path.write_text(json.dumps(document))
    run = 0
    while "CUSTOM_FOREIGN" in placement.provider(node)["traits"]:
        assert run < period, f"not repaired within {period} passes"
        run += 1
        assert cli("reconcile", config_file=conf)[0] == 0
    # Trusted until its pass came: the cache was used, and bounded.
    assert observations.due(node, saved["pass"] + run, period)
    assert run == 1 or not observations.due(node, saved["pass"] + run - 1, period)
