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

nova's environment is made as deployment tools make it: a clean virtualenv with the
series' nova under the series' OpenStack upper-constraints (constraints/<series>.txt).
The README's install lines then run in it as written, with ``$NOVA_VENV`` and
``$SERIES`` set: first as pip's dry run, whose report must move no package already
there, then for real, ``pip freeze`` taken before and after; nova-compute then starts
from it by its own command with the driver.  Runs in every ``nova-<series>``
environment (``nova``: the newest).
"""

import json
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
from tools.localstack import upper_constraints

RELEASE = releases.current().name
VENV_OWN = ("pip", "setuptools")  # what a new virtualenv holds before anything is installed
REPO = pathlib.Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.functional


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
    return upper_constraints.frozen(out)


def run_readme_lines(venv, dry_run_report=None):
    """The README's lines as an operator's shell runs them ($NOVA_VENV, $SERIES, the
    wheel's glob); with ``dry_run_report``, its pip install as a dry run reporting there."""
    for line in readme_install_lines():
        if dry_run_report:
            line = line.replace("pip install ", f"pip install --dry-run --quiet --report "
                                               f"{dry_run_report} ")
        result = subprocess.run(line, shell=True, cwd=REPO, capture_output=True,  # noqa: S602
                                text=True, timeout=900,
                                env=dict(os.environ, NOVA_VENV=str(venv), SERIES=RELEASE))
        assert result.returncode == 0, f"{line}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """nova's clean virtualenv, before and after the README's lines:
    (venv, before, what pip's dry run would install, after)."""
    venv = tmp_path_factory.mktemp("nova-compute") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    nova = f"nova=={releases.RELEASES[RELEASE].services['nova']}"
    subprocess.run([process.uv(), "pip", "install", "--quiet", "--python",
                    str(venv / "bin" / "python3"), "--constraint",
                    str(releases.constraints_file(RELEASE)), nova], check=True, timeout=600)
    before = freeze(venv)
    for wheel in (REPO / "dist").glob("rp_reporter*.whl"):
        wheel.unlink()  # each glob of the README's line takes one
    report = venv.parent / "report.json"
    run_readme_lines(venv, dry_run_report=report)
    would = {upper_constraints.canonical(item["metadata"]["name"]): item["metadata"]["version"]
             for item in json.loads(report.read_text())["install"]}
    assert freeze(venv) == before  # a dry run
    run_readme_lines(venv)
    return venv, before, would, freeze(venv)


@pytest.fixture
def nova_bin(installed):
    return str(installed[0] / "bin")


def test_the_readme_install_changes_no_version_in_novas_environment(installed):
    venv, before, would, after = installed
    assert "rp-reporter" in would, would
    assert not {name: (before[name], version) for name, version in would.items()
                if name in before}, "pip's dry run would move these"
    changed = {name: (version, after.get(name)) for name, version in before.items()
               if after.get(name) != version}
    assert not changed, changed  # none upgraded, downgraded or removed
    added = set(after) - set(before)
    assert {"rp-reporter", "rp-reporter-nova"} <= added, added
    pins = upper_constraints.pinned(releases.constraints_file(RELEASE).read_text())
    assert not upper_constraints.moved({name: after[name] for name in added}, pins)
    assert before["nova"] == releases.RELEASES[RELEASE].services["nova"]
    # nova's environment is the series' (but what ``python -m venv`` put there itself)
    assert not upper_constraints.moved(
        {name: version for name, version in before.items() if name not in VENV_OWN}, pins)
    assert "constraints/$SERIES.txt" in " ".join(readme_install_lines())


def test_nova_compute_of_that_environment_loads_the_driver(nova_compute, ironic,  # noqa: F811
                                                          placement):
    loads_the_driver_and_reports_the_nodes(nova_compute, ironic, placement)
