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
