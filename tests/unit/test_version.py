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

"""The version pbr builds (from the git tags, setup.cfg's pre-version where none is
reachable), shown by both commands and carried by the installed distribution."""

import configparser
import importlib.metadata
import os
import shutil
import subprocess
import sys

import pytest
from packaging import version as packaging_version

from rp_reporter import agent
from rp_reporter import version
from rp_reporter.cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cli_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exited:
        app.ReporterApp().run(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.split()[-1] == version.version_info.version_string()


def test_the_agent_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exited:
        agent.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == version.version_info.version_string()


def test_the_version_is_the_installed_distributions():
    assert version.version_info.release_string() == importlib.metadata.version("rp_reporter")


def _git(clone, *args):
    subprocess.run(["git", "-C", clone, "-c", "user.name=t", "-c", "user.email=t@t",
                    *args], check=True, capture_output=True)


def _built_version(clone):
    """The version pbr gives the tree (what an sdist or wheel built from it carries)."""
    done = subprocess.run([sys.executable, "setup.py", "-q", "--version"], cwd=clone,
                          check=True, capture_output=True, text=True)
    return packaging_version.Version(done.stdout.split()[-1])


@pytest.mark.skipif(not os.path.exists(os.path.join(ROOT, ".git")) or not shutil.which("git"),
                    reason="a source tree without its git history (an sdist)")
def test_two_tagged_releases_build_two_increasing_versions(tmp_path):
    clone = str(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", ROOT, clone], check=True)
    setup_cfg = configparser.ConfigParser()
    setup_cfg.read(os.path.join(clone, "setup.cfg"))
    pre = packaging_version.Version(setup_cfg["metadata"]["version"])
    untagged = _built_version(clone)
    assert untagged.is_devrelease and untagged.release == pre.release, untagged
    _git(clone, "tag", "-a", str(pre), "-m", str(pre))
    assert _built_version(clone) == pre
    following = f"{pre.major}.{pre.minor + 1}.0"
    with open(os.path.join(clone, "setup.cfg")) as f:
        text = f.read()
    with open(os.path.join(clone, "setup.cfg"), "w") as f:
        f.write(text.replace(f"version = {pre}", f"version = {following}", 1))
    _git(clone, "commit", "-q", "-am", f"open {following}")
    between = _built_version(clone)
    _git(clone, "tag", "-a", following, "-m", following)
    assert pre < between < _built_version(clone) == packaging_version.Version(following)
