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

"""The driver installed into a release's nova-compute the way the README says, every pin
of nova's environment kept.

nova's environment is made as deployment tools make it: a clean virtualenv with nova
under its series' constraints (2025.1: nova 31, the release furthest from the project's
own pins).  The README's install lines then run in it as written, ``pip freeze`` is taken
before and after, and nova-compute 31 starts from it by its own command with the driver.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.nova.service.test_nova_compute_service import loads_the_driver_and_reports_the_nodes
from tests.nova.service.test_nova_compute_service import nova_compute  # noqa: F401
from tools.localstack import process
from tools.localstack import releases

RELEASE = "2025.1"
REPO = pathlib.Path(__file__).resolve().parents[3]
pytestmark = [
    pytest.mark.functional,
    pytest.mark.skipif(releases.current().name != RELEASE,
                       reason=f"tested into {RELEASE}'s nova (tox -e nova-{RELEASE})"),
]


def readme_install_lines():
    """The README's shell block that installs the driver into nova-compute's virtualenv."""
    blocks = re.findall(r"```sh\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    found = [block for block in blocks if "$NOVA_VENV" in block]
    assert len(found) == 1, blocks
    return [line for line in found[0].splitlines() if line.strip()]


def freeze(venv):
    """{distribution: version, or where a wheel installed from a file came from} of the
    virtualenv, as its pip sees them."""
    out = subprocess.run([venv / "bin" / "python3", "-m", "pip", "freeze", "--all"],
                         capture_output=True, text=True, check=True).stdout
    return dict(re.split(r"==| @ ", line, maxsplit=1) for line in out.splitlines()
                if "==" in line or " @ " in line)


def constraints():
    """{distribution: version} of the release's constraints file."""
    lines = releases.constraints_file(RELEASE).read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """nova's clean virtualenv, before and after the README's lines: (venv, before, after)."""
    venv = tmp_path_factory.mktemp("nova-compute") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    nova = f"nova=={releases.RELEASES[RELEASE].services['nova']}"
    subprocess.run([process.uv(), "pip", "install", "--quiet", "--python",
                    str(venv / "bin" / "python3"), "--constraint",
                    str(releases.constraints_file(RELEASE)), nova], check=True, timeout=600)
    before = freeze(venv)
    for wheel in (REPO / "dist").glob("rp_reporter-*.whl"):
        wheel.unlink()  # the glob of the README's line takes one
    for line in readme_install_lines():
        # the line as an operator's shell runs it ($NOVA_VENV, the wheel's glob)
        result = subprocess.run(line, shell=True, cwd=REPO, capture_output=True,  # noqa: S602
                                text=True, env=dict(os.environ, NOVA_VENV=str(venv)),
                                timeout=900)
        assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    return venv, before, freeze(venv)


@pytest.fixture
def nova_bin(installed):
    return str(installed[0] / "bin")


def test_the_readme_install_changes_no_version_in_novas_environment(installed):
    venv, before, after = installed
    assert "constraints/2025.1.txt" in " ".join(readme_install_lines())
    changed = {name: (version, after.get(name)) for name, version in before.items()
               if after.get(name) != version}
    assert not changed, changed  # none upgraded, downgraded or removed
    added = set(after) - set(before)
    assert "rp_reporter" in {name.replace("-", "_").lower() for name in added}, added
    assert all(after[name] == pin for name, pin in constraints().items() if name in added)
    assert before["nova"] == releases.RELEASES[RELEASE].services["nova"]


def test_nova_compute_of_that_environment_loads_the_driver(nova_compute, ironic,  # noqa: F811
                                                          placement):
    loads_the_driver_and_reports_the_nodes(nova_compute, ironic, placement)
