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

"""Capabilities as traits behind real Keystone: the trait and ``extra`` writes need a
system-scoped member on Ironic; a reader is told so in one line and nothing changes."""

import pytest

from rp_reporter.traits import RECORD_KEY
from tests.functional.conftest import run_json
from tests.keystone.test_safety import one_line

pytestmark = pytest.mark.functional

UEFI = "CUSTOM_CAP_BOOT_MODE_UEFI"


def test_traits_from_capabilities_needs_system_member(stack, write_conf, cli, ironic,
                                                      placement):
    node = ironic.create(state="enroll", traits=["CUSTOM_BY_HAND"])
    ironic.patch(node, properties={"capabilities": "boot_mode:uefi"})
    code, _, err = cli("traits", "from-capabilities", node)  # the default: a system reader
    line = one_line(err)
    assert code == 2 and line.startswith("rp-reporter: error: [ironic]") and "403" in line
    assert "traits from-capabilities also need system member" in line
    after = ironic.get(node)
    assert set(after["traits"]) == {"CUSTOM_BY_HAND"}
    assert RECORD_KEY not in (after["extra"] or {})

    member = write_conf(ironic=stack.credentials("rp-system-member"))
    code, rows, _ = run_json(cli, "traits", "from-capabilities", node, config_file=member)
    assert code == 0 and [r["result"] for r in rows] == ["changed"]
    after = ironic.get(node)
    assert set(after["traits"]) == {"CUSTOM_BY_HAND", UEFI}
    assert after["extra"][RECORD_KEY] == [UEFI]
    # The reader may carry them to Placement: reading is all the reconcile needs of Ironic.
    assert cli("reconcile")[0] == 0
    assert UEFI in placement.provider_trait_names(node)
