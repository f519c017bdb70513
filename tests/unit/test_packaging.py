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

"""What a packager builds: the distributions pbr makes from the tree, offline, with this
environment's setuptools and pbr (as a distribution's build does, without build
isolation)."""

import configparser
import email.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Set in the unit tests an unpacked sdist runs, so that they do not build it again.
IN_SDIST = "RP_TEST_FROM_SDIST"
# Set by one environment (tox -e unit): the sdist's own run is the same on every Python.
SDIST_RUN = "RP_TEST_SDIST"


def source_copy(tmp_path):
    """The tree as a build sees it: a clone of the committed tree where there is git
    history, else (an unpacked sdist, whose PKG-INFO gives pbr the version) a copy."""
    copy = tmp_path / "source"
    if (ROOT / ".git").exists() and shutil.which("git"):
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(copy)],
                       check=True)
    else:
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".tox", "*.egg-info"))
    return copy


def build(source, kind, out, version=None):
    """pbr's PEP 517 hook ``build_<kind>`` run in ``source``: the file it made.
    ``version``: PBR_VERSION, as a distribution's build of an unpacked sdist sets it for
    a tree pbr cannot version (no git history, no PKG-INFO of its own: shims/)."""
    out.mkdir(exist_ok=True)
    done = subprocess.run(
        [sys.executable, "-c",
         f"import sys; from pbr import build; print(build.build_{kind}(sys.argv[1]))",
         str(out)], cwd=source, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, **({"PBR_VERSION": version} if version else {})))
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.split()[-1]


def test_the_drivers_shim_is_a_distribution_of_its_own_and_the_wheel_brings_no_nova(
        tmp_path):
    """An agent-only or CLI-only install gets no ``nova`` package: the one module in
    nova's namespace is in rp_reporter_nova's wheel alone.  The wheel carries what an
    installed system needs beside the code, and the documents the units name."""
    source = source_copy(tmp_path)
    ours = zipfile.ZipFile(build(source, "wheel", tmp_path / "dist")).namelist()
    assert not [name for name in ours if name.startswith("nova/")], ours
    assert "rp_reporter/nova_compute/driver.py" in ours
    data = {name.split(".data/data/", 1)[1] for name in ours if ".data/data/" in name}
    for unit in (source / "etc" / "systemd").iterdir():
        assert f"share/rp_reporter/systemd/{unit.name}" in data, data
        for document in re.findall(r"^Documentation=file:///usr/(\S+)$", unit.read_text(),
                                   re.MULTILINE):
            assert document in data, (unit.name, document)  # under the prefix /usr
    for guide in [*(source / "doc" / "source" / "install").glob("*.md"),
                  *(source / "doc" / "source" / "admin").glob("*.md")]:
        assert f"share/doc/rp_reporter/{guide.name}" in data, guide  # listed in setup.cfg
    assert {"etc/rp_reporter/rp_reporter.conf.sample",
            "etc/rp_reporter/nova.conf.rp_reporter.sample",
            "share/rp_reporter/prometheus/rp_reporter.rules.yml",
            "share/rp_reporter/grafana/rp_reporter.json"} <= data, data
    version = None
    if not (source / ".git").exists():
        version = email.parser.Parser().parse((source / "PKG-INFO").open())["Version"]
    shim = zipfile.ZipFile(build(source / "shims", "wheel", tmp_path / "dist",
                                 version)).namelist()
    assert [n for n in shim if not n.startswith("rp_reporter_nova-")] == [
        "nova/virt/rp_reporter.py"], shim


def test_the_shim_is_versioned_with_rp_reporter():
    versions = {}
    for cfg in (ROOT / "setup.cfg", ROOT / "shims" / "setup.cfg"):
        parsed = configparser.ConfigParser()
        parsed.read(cfg)
        versions[str(cfg.relative_to(ROOT))] = parsed["metadata"]["version"]
    assert len(set(versions.values())) == 1, versions


@pytest.mark.skipif(bool(os.environ.get(IN_SDIST)) or not os.environ.get(SDIST_RUN),
                    reason=f"already in the unpacked sdist, or {SDIST_RUN} unset")
def test_the_sdist_runs_its_own_unit_tests(tmp_path):
    """Unpacked anywhere, the sdist holds what its unit tests need and they pass there,
    offline and with no service, as a distribution's build runs them."""
    sdist = build(source_copy(tmp_path), "sdist", tmp_path / "dist")
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path / "unpacked", **safe)  # noqa: S202 (the sdist just built)
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    for needed in ("tests/unit", "tools", ".importlinter", "shims/setup.cfg", "bindep.txt",
                   "etc/rp_reporter/rp_reporter.conf.sample", "AUTHORS", "ChangeLog"):
        assert (unpacked / needed).exists(), needed
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "tests/unit"],
        cwd=unpacked, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, **{IN_SDIST: "1"}))
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-500:]
