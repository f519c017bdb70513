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

"""One version, written once (rp_reporter.__version__), shown by both commands and
carried by the installed distribution's metadata."""

import configparser
import importlib.metadata
import os

import pytest

import rp_reporter
from rp_reporter import agent
from rp_reporter.cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_cli_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exited:
        app.ReporterApp().run(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.split()[-1] == rp_reporter.__version__


def test_the_agent_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exited:
        agent.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == rp_reporter.__version__


def test_the_build_reads_the_version_from_the_package():
    setup = configparser.ConfigParser()
    setup.read(os.path.join(ROOT, "setup.cfg"))
    assert setup["metadata"]["version"] == "attr: rp_reporter.__version__"
    assert importlib.metadata.version("rp_reporter") == rp_reporter.__version__
