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

"""The release table: each release's services, its constraints, what the stacks install."""

import pytest

from tools.localstack import releases

SERVICES = {"nova", "ironic", "openstack-placement", "keystone", "glance", "neutron"}


@pytest.mark.parametrize("name", list(releases.RELEASES))
def test_each_release_pins_every_service_and_its_constraints_agree(name):
    release = releases.RELEASES[name]
    assert set(release.services) == SERVICES
    constraints = releases.constraints_file(name)
    if name == releases.NEWEST:
        assert constraints is None
        return
    pinned = dict(line.split("==") for line in constraints.read_text().splitlines()
                  if "==" in line and not line.startswith("#"))
    for service, version in release.services.items():
        assert pinned[service] == version, (name, service)


def test_the_release_chosen_sets_pins_virtualenvs_and_installer(monkeypatch):
    monkeypatch.delenv(releases.ENV, raising=False)
    assert releases.current().name == releases.NEWEST
    assert releases.venv_suffix() == "" and releases.installer_options() == []
    monkeypatch.setenv(releases.ENV, "2025.1")
    assert releases.pins("nova", "gunicorn") == ("nova==31.3.1", "gunicorn")
    assert releases.venv_suffix() == "-2025.1"
    assert releases.installer_options() == [
        "--constraint", str(releases.constraints_file("2025.1"))]
    monkeypatch.setenv(releases.ENV, "2024.2")
    with pytest.raises(SystemExit, match="not a maintained release"):
        releases.current()
