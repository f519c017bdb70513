"""``rp-reporter status NODE --explain`` against real Ironic and Placement."""

import pytest

from tests.functional.conftest import run_json

pytestmark = pytest.mark.functional


def test_status_explain_says_every_rule_before_and_after_a_sync(ironic, cli):
    node = ironic.create(maintenance=True, traits=("CUSTOM_GPU",))
    code, rows, err = run_json(cli, "status", node, "--explain")
    assert code == 0, err
    rules = {r["rule"]: r["explanation"] for r in rows}
    assert {r["node"] for r in rows} == {node}
    assert "it is in maintenance" in rules["reserved"]
    assert rules["class"].startswith("Ironic resource_class 'baremetal-gold' is Placement "
                                     "class CUSTOM_BAREMETAL_GOLD")
    assert "CUSTOM_GPU" in rules["traits"]
    assert rules["owner"].startswith("rp-local (this host) syncs it")
    assert rules["placement"].startswith("no provider yet")
    assert rules["in step"].startswith("no: the next sync writes create the provider")
    assert rules["flavor"].startswith("resources:CUSTOM_BAREMETAL_GOLD=1 resources:VCPU=0")
    assert "trait:CUSTOM_GPU=required" in rules["flavor"]
    assert "cannot land now (reserved)" in rules["flavor"]

    assert cli("reconcile")[0] == 0
    code, rows, _ = run_json(cli, "status", node, "--explain")
    rules = {r["rule"]: r["explanation"] for r in rows}
    assert rules["placement"].startswith("holds CUSTOM_BAREMETAL_GOLD reserved 1 of 1")
    assert rules["in step"].startswith("yes")

    code, out, err = cli("status", "--explain")
    assert code == 2 and out == ""
    assert err == "rp-reporter: error: --explain needs the nodes to explain (NODE ...)\n"
