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

"""The driver where nova is a distribution's package: nova in one site directory,
rp_reporter in another.

nova's environment is a clean virtualenv with the series' nova, standing for the
distribution's site directory.  rp_reporter's wheel, with what nova's environment lacks,
goes into a directory of its own that nova's Python reads as a site directory (a
``.pth`` line naming it, as a distribution's Python reads /usr/local's), and the shim's
wheel goes where nova is, as a distribution's package of it would.  With the shim beside
rp_reporter instead, where the wheel put it before it was a distribution of its own,
nova's loader cannot find it; where nova is, nova-compute started by its own command
loads the driver and reports the nodes.  One series (the newest): the layout is the
same on every one.
"""

import pathlib
import shutil
import subprocess
import sys

import pytest

from tests.nova.service.test_nova_compute_service import loads_the_driver_and_reports_the_nodes
from tests.nova.service.test_nova_compute_service import nova_compute  # noqa: F401
from tools.localstack import process
from tools.localstack import releases

RELEASE = releases.current().name
REPO = pathlib.Path(__file__).resolve().parents[3]
pytestmark = [pytest.mark.functional, pytest.mark.skipif(
    RELEASE != releases.NEWEST, reason="the layout is the same on every series")]


def imports(python, module):
    """Where ``python`` imports ``module`` from, or the last line of its error (run
    from the root directory: ``-c`` puts the working directory first on sys.path)."""
    done = subprocess.run([python, "-c", f"import {module}; print({module}.__file__)"],
                          capture_output=True, text=True, cwd="/")
    return (done.stdout or done.stderr).strip().splitlines()[-1]


@pytest.fixture(scope="module")
def distro(tmp_path_factory):
    """(nova's virtualenv, rp_reporter's site directory, what the shim beside rp_reporter
    imported as), the shim where nova is."""
    base = tmp_path_factory.mktemp("distro")
    venv, elsewhere, wheels = base / "nova", base / "site", base / "dist"
    constraints = str(releases.constraints_file(RELEASE))
    python = str(venv / "bin" / "python3")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([process.uv(), "pip", "install", "--quiet", "--python", python,
                    "--constraint", constraints,
                    f"nova=={releases.RELEASES[RELEASE].services['nova']}"],
                   check=True, timeout=600)
    subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(REPO), str(REPO / "shims")], check=True, timeout=600)
    (ours,), (shim,) = wheels.glob("rp_reporter-*.whl"), wheels.glob("rp_reporter_nova-*.whl")
    subprocess.run([process.uv(), "pip", "install", "--quiet", "--python", python,
                    "--target", str(elsewhere), "--constraint", constraints, str(ours)],
                   check=True, timeout=600)
    site = pathlib.Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True).stdout.strip())
    (site / "rp-reporter-site.pth").write_text(f"{elsewhere}\n")
    # The shim beside rp_reporter (in its site directory), not where nova is.
    beside = elsewhere / "nova" / "virt"
    beside.mkdir(parents=True)
    shutil.copy(REPO / "shims" / "nova" / "virt" / "rp_reporter.py", beside)
    shim_beside = imports(python, "nova.virt.rp_reporter")
    shutil.rmtree(elsewhere / "nova")
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(shim)],
                   check=True, timeout=300)
    return venv, elsewhere, shim_beside


@pytest.fixture
def nova_bin(distro):
    return str(distro[0] / "bin")


def test_the_shim_is_found_only_where_nova_is(distro):
    venv, elsewhere, shim_beside = distro
    python = str(venv / "bin" / "python3")
    assert "No module named 'nova.virt.rp_reporter'" in shim_beside, shim_beside
    assert imports(python, "rp_reporter").startswith(str(elsewhere)), imports(
        python, "rp_reporter")
    assert imports(python, "nova").startswith(str(venv))
    assert imports(python, "nova.virt.rp_reporter").startswith(str(venv))


def test_nova_compute_of_the_distro_layout_loads_the_driver(nova_compute, ironic,  # noqa: F811
                                                            placement):
    loads_the_driver_and_reports_the_nodes(nova_compute, ironic, placement)
