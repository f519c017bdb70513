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
from tools.localstack import upper_constraints

SERVICES = {"nova", "ironic", "openstack-placement", "keystone", "glance", "neutron"}


@pytest.mark.parametrize("name", list(releases.RELEASES))
def test_each_release_pins_every_service_and_its_file_is_made_from_its_sources(name):
    release = releases.RELEASES[name]
    assert set(release.services) == SERVICES
    text = releases.constraints_file(name).read_text()
    assert text == upper_constraints.merged(name, release.services)  # tools.localstack constraints
    pinned = upper_constraints.pinned(text)
    for service, version in release.services.items():
        assert pinned[service] == version, (name, service)


@pytest.mark.parametrize("name", list(releases.RELEASES))
def test_each_release_keeps_openstacks_pins_but_what_its_overlay_names(name):
    """Every pin of OpenStack's file for the series is in the merged file, at OpenStack's
    version, except the few the overlay moves; each overlay line says why."""
    here = upper_constraints.HERE
    openstack = (here / "openstack" / f"{name}.txt").read_text()
    assert openstack.startswith("# openstack/requirements, branch ")
    overlay = (here / "overlay" / f"{name}.txt").read_text()
    lines = [line for line in overlay.splitlines() if line and not line.startswith("#")]
    assert all(" # " in line for line in lines), lines  # each says why
    merged = upper_constraints.pinned(releases.constraints_file(name).read_text())
    theirs = upper_constraints.pinned(openstack)
    moved = upper_constraints.moved(theirs, merged)
    assert set(moved) == set(upper_constraints.pinned(overlay)) & set(theirs), moved
    assert len(moved) <= 5, moved  # an overlay stays short
    assert "cryptography" in theirs and "cryptography" not in moved


def test_lower_constraints_hold_each_minimum_on_the_oldest_series_pins():
    text = upper_constraints.LOWER.read_text()
    oldest = releases.constraints_file(releases.OLDEST).read_text()
    assert text == upper_constraints.lower(oldest)  # tools.localstack constraints
    pins = upper_constraints.pinned(text)
    for name in upper_constraints.REQUIREMENTS:
        for requirement, low in upper_constraints.minimums(
                (upper_constraints.LOWER.parent / name).read_text()).items():
            assert pins[requirement] == low, requirement
    assert pins["nova"] == releases.RELEASES[releases.OLDEST].services["nova"]


def test_merge_replaces_openstacks_lines_markers_and_all():
    openstack = ("# header\nfoo===1.0;python_version=='3.9'\nfoo===2.0;python_version>='3.10'\n"
                 "Bar_Baz===3.0\nkeep===4.0\n")
    merged = upper_constraints.merge(openstack, "# why\nbar-baz==3.1  # newer\n", {"svc": "9"})
    assert merged.splitlines() == ["svc==9  # the series' service (releases.py)",
                                   "bar-baz==3.1  # newer", "foo===1.0;python_version=='3.9'",
                                   "foo===2.0;python_version>='3.10'", "keep===4.0"]
    assert upper_constraints.pinned(merged, {"python_version": "3.9"})["foo"] == "1.0"
    assert upper_constraints.pinned(merged, {"python_version": "3.12"})["foo"] == "2.0"
    assert upper_constraints.moved({"Bar.Baz": "3.0", "keep": "4.0", "other": "1"},
                                   upper_constraints.pinned(merged)) == {"bar-baz": ("3.0", "3.1")}


def test_the_release_chosen_sets_pins_virtualenvs_and_installer(monkeypatch):
    monkeypatch.delenv(releases.ENV, raising=False)
    assert releases.current().name == releases.NEWEST
    assert releases.venv_suffix() == "" and releases.installer_options() == [
        "--constraint", str(releases.constraints_file(releases.NEWEST))]
    monkeypatch.setenv(releases.ENV, "2025.1")
    assert releases.pins("nova", "gunicorn") == ("nova==31.3.1", "gunicorn")
    assert releases.venv_suffix() == "-2025.1"
    assert releases.installer_options() == [
        "--constraint", str(releases.constraints_file("2025.1"))]
    monkeypatch.setenv(releases.ENV, "2024.2")
    with pytest.raises(SystemExit, match="not a maintained release"):
        releases.current()
