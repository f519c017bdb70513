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

"""The stack's virtualenv holds its series' pins: Placement and Ironic at the release
table's versions, every library at OpenStack's upper-constraints of the series."""

import subprocess

import pytest

from tools.localstack import process
from tools.localstack import releases
from tools.localstack import upper_constraints

pytestmark = [pytest.mark.functional, pytest.mark.every_release]


def test_the_stack_virtualenv_installed_its_series_pins(stack):
    out = subprocess.run([process.venv_bin("python"), "-m", "pip", "freeze", "--all"],
                         capture_output=True, text=True, check=True).stdout
    frozen = upper_constraints.frozen(out)
    pins = upper_constraints.pinned(releases.constraints_file().read_text())
    assert not upper_constraints.moved(frozen, pins)
    services = releases.current().services
    assert frozen["ironic"] == services["ironic"]
    assert frozen["openstack-placement"] == services["openstack-placement"]
    assert len(set(frozen) & set(pins)) > 50, out[:500]  # the libraries too
    assert process.venv_current(process.stack_venv())
