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

"""The environment running the tests holds its series' pins: every distribution the
series' file names is installed at the file's version (tox's constraints, the
release's services included).  Run by each series' environments (RP_OPENSTACK_RELEASE;
none: the newest)."""

import importlib.metadata

import pytest

from tools.localstack import releases
from tools.localstack import upper_constraints

pytestmark = pytest.mark.every_release


def installed():
    return {dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions()}


def test_this_environment_installed_its_series_pins():
    file = releases.constraints_file()
    pins = upper_constraints.pinned(file.read_text())
    here = installed()
    assert upper_constraints.canonical("oslo.config") in {
        upper_constraints.canonical(name) for name in here}
    assert not upper_constraints.moved(here, pins), f"installed beside {file.name}'s pins"
