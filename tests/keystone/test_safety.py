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

"""Behind real Keystone: credentials that cannot see the nodes delete nothing, every
misconfiguration is one line naming its section, and the agent survives them.

The identities are the stack's (tools/localstack/keystone.py IDENTITIES); the measured grants
they stand for are in doc/source/install/requirements.md ("Behind Keystone").  The deletion rules of
tests/functional run here again with the right credentials (a system-scoped reader
for Ironic, the service role for Placement).
"""

import pathlib
import time
import uuid

import pytest

from tests.functional import test_reconcile as deletion_rules
from tests.functional.conftest import run_json
from tools import clients
from tools import localstack
from tools.wait import wait_for

pytestmark = pytest.mark.functional
ROOT = pathlib.Path(__file__).resolve().parents[2]

test_decommissioned_node = \
    deletion_rules.test_node_deleted_in_ironic_loses_its_provider_after_two_passes
test_mass_disappearance = deletion_rules.test_a_mass_disappearance_is_refused_unless_allowed


def blind_ironic(stack):
    """Ironic as the service project's service user sees it: none of the nodes."""
    return stack.credentials("rp-service")


def one_line(err):
    lines = [line for line in err.strip().splitlines() if line.startswith("rp-reporter:")]
    assert len(lines) == 1 and len(err.strip().splitlines()) == 1, err
    return lines[0]


def test_credentials_that_cannot_see_the_nodes_delete_nothing_and_say_why(
        stack, write_conf, tmp_path, cli, ironic, placement):
    nodes = ironic.create_many(3)
    assert cli("reconcile")[0] == 0  # the right credentials
    assert all(placement.provider(n) for n in nodes)
    blind = write_conf(ironic=blind_ironic(stack),
                       DEFAULT={"state_path": str(tmp_path / "state")},
                       reconcile={"interval": 1})
    for args in (("reconcile", "--dry-run"), ("reconcile",), ("reconcile",)):
        code, _, err = cli(*args, config_file=blind)
        assert code == 1, err
        line = one_line(err)
        assert line.startswith("rp-reporter: deletion refused:")
        assert "scoped to project" in line and "system_scope = all" in line
        time.sleep(1)  # an interval: had the guard trusted the listing, it would delete now
    assert all(placement.provider(n) for n in nodes)
    code, rows, _ = run_json(cli, "check", config_file=blind)
    failed = {r["check"]: r["detail"] for r in rows if r["result"] == "FAIL"}
    assert code == 2 and "system_scope = all" in failed["ironic listing"]
    assert "placement writes" not in failed


def test_the_agent_with_blind_credentials_keeps_every_provider_and_is_unhealthy(
        stack, agents, ironic, placement):
    nodes = ironic.create_many(3)
    seeing = agents(name="seeing", reconcile={"interval": 2, "jitter": 0})
    wait_for(lambda: all(placement.provider(n) for n in nodes), 30, "providers created")
    seeing.stop()
    blind = agents(name="blind", wait_healthy=False, ironic=blind_ironic(stack),
                   reconcile={"interval": 2, "jitter": 0})
    wait_for(lambda: "deletion refused" in blind.health()[1], 30, "/healthz says why")
    time.sleep(5)  # two more passes
    assert blind.health()[0] == 503
    assert all(placement.provider(n) for n in nodes)
    assert blind.metric("rp_reporter_deletions_refused_total",
                        '{reason="unproven_listing"}') >= 2


def test_status_and_audit_say_plainly_when_ironic_shows_nothing(stack, write_conf, cli,
                                                                ironic):
    node = ironic.create()
    assert cli("reconcile")[0] == 0
    blind = write_conf(ironic=blind_ironic(stack))
    code, _, err = cli("status", config_file=blind)
    assert code == 1 and "Ironic shows no nodes in scope while Placement holds" in err
    code, _, err = cli("status", node, config_file=blind)
    assert code == 2 and f"no such node in Ironic: {node}" in err and "scoped to project" in err
    code, out, err = cli("resource-class", "audit", config_file=blind)
    assert code == 1 and "deletion refused" in err


def test_a_placement_user_without_the_service_role_is_told_what_to_grant(
        stack, write_conf, cli, ironic):
    ironic.create()
    conf = write_conf(placement=stack.credentials("rp-reader"))
    code, _, err = cli("reconcile", config_file=conf)
    line = one_line(err)
    assert code == 2 and line.startswith("rp-reporter: error: [placement]")
    assert "403" in line and "service role" in line


def test_admin_without_service_role_loses_only_the_bulk_path_and_counts_right(
        stack, write_conf, cli, ironic, placement):
    nodes = ironic.create_many(4)
    conf = write_conf(placement=stack.credentials("rp-admin"))
    code, (summary,), err = run_json(cli, "reconcile", config_file=conf)
    assert code == 0, err
    assert (summary["created"], summary["updated"]) == (4, 0)
    assert all(placement.provider(n) for n in nodes)
    code, rows, _ = run_json(cli, "check", config_file=conf)
    results = {r["check"]: r["result"] for r in rows}
    assert code == 0 and results["placement reshaper"] == "warn"


@pytest.mark.parametrize("section,override,expected", [
    ("ironic", {"password": "wrong"}, "[ironic] Keystone refused the credentials"),
    ("placement", {"region_name": "RegionTwo"}, "[placement] no placement endpoint in the "
                                                "service catalog"),
    ("ironic", {"region_name": "RegionTwo"}, "[ironic] no baremetal endpoint in the service "
                                             "catalog"),
])
def test_keystone_misconfiguration_is_one_line_and_exit_2(
        stack, write_conf, cli, section, override, expected):
    creds = stack.credentials("rp-system-reader" if section == "ironic" else "rp-service")
    conf = write_conf(**{section: {**creds, **override}})
    code, _, err = cli("reconcile", config_file=conf)
    assert code == 2 and expected in one_line(err)


def keystone_admin(stack):
    return clients.session({}, auth=clients.KeystoneToken(
        stack.keystone_url + "/v3", "admin", localstack.ADMIN_PASSWORD,
        {"system": {"all": True}}))


def create_service_user(stack, name, password):
    """What an operator does to fix the agent's [placement] user: create it, grant it."""
    http, api = keystone_admin(stack), stack.keystone_url + "/v3"
    user = clients.call(http, "POST", api + "/users", (201,), json={"user": {
        "name": name, "password": password, "domain_id": "default"}})["user"]["id"]
    (project,) = clients.call(http, "GET", api + "/projects?name=service", (200,))["projects"]
    (role,) = clients.call(http, "GET", api + "/roles?name=service", (200,))["roles"]
    clients.call(http, "PUT", f"{api}/projects/{project['id']}/users/{user}/roles/{role['id']}",
               (204,))


def test_the_agent_survives_refused_credentials_and_recovers_once_fixed(
        stack, agents, ironic, placement):
    name = f"rp-late-{uuid.uuid4().hex[:8]}"
    creds = {**stack.credentials("rp-service"), "username": name, "password": "late-secret"}
    agent = agents(name="late", wait_healthy=False, placement=creds,
                   agent={"retry_backoff_max": 2})
    wait_for(lambda: "[placement] Keystone refused the credentials" in agent.health()[1], 30,
             "/healthz naming [placement] and the cause")
    assert agent.health()[0] == 503 and agent.proc.poll() is None
    node = ironic.create()
    create_service_user(stack, name, "late-secret")
    wait_for(agent.healthy, 30, "recovered")
    wait_for(lambda: placement.provider(node), 30, "the node's provider")
    log = agent.output()
    assert "Placement cannot be used as configured: fix the configuration" in log
    assert "Traceback" not in log


def test_the_shipped_keystone_example_does_the_whole_job(stack, shard, tmp_path, cli, ironic,
                                                         placement):
    example = (ROOT / "etc" / "rp_reporter" / "rp_reporter.conf.keystone-example").read_text()
    for placeholder, value in (
            ("https://keystone.example.org/v3", stack.keystone_url + "/v3"),
            ("rp-reporter-ironic", "rp-system-reader"),
            ("IRONIC_PASSWORD", stack.credentials("rp-system-reader")["password"]),
            ("username = rp-reporter\n", "username = rp-service\n"),
            ("PLACEMENT_PASSWORD", stack.credentials("rp-service")["password"]),
            ("/var/lib/rp_reporter", str(tmp_path / "state")),
            ("rabbit://rp-reporter:RABBIT_PASSWORD@rabbit.example.org:5672/",
             stack.transport_url),
            ("etcd3+http://etcd.example.org:2379", stack.coordination_url),
            ("[ironic]\n", f"[ironic]\nshard = {shard}\n")):
        assert placeholder in example, placeholder
        example = example.replace(placeholder, value)
    conf = tmp_path / "keystone-example.conf"
    conf.write_text(example)
    node = ironic.create()
    code, rows, err = run_json(cli, "check", config_file=str(conf))
    assert code == 0 and {r["result"] for r in rows} == {"ok"}, rows
    assert cli("reconcile", config_file=str(conf))[0] == 0
    assert placement.provider(node)["inventories"] == {"CUSTOM_BAREMETAL_GOLD": (1, 0, 1)}


def test_resource_class_set_needs_system_member(stack, write_conf, cli, ironic):
    node = ironic.create(state="enroll")
    code, _, err = cli("resource-class", "set", "--resource-class", "bm-x", node)
    line = one_line(err)  # the default [ironic] user: a system reader
    assert code == 2 and line.startswith("rp-reporter: error: [ironic]") and "403" in line
    assert "system member" in line and ironic.get(node)["resource_class"] == "baremetal-gold"
    member = write_conf(ironic=stack.credentials("rp-system-member"))
    code, rows, _ = run_json(cli, "resource-class", "set", "--resource-class", "bm-x", node,
                             config_file=member)
    assert code == 0 and [r["result"] for r in rows] == ["changed"]
    assert ironic.get(node)["resource_class"] == "bm-x"
