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

"""The stacks' cached virtualenvs outlive the tox environment that made them: made on
the base interpreter, and made again when their interpreter is gone."""

import json
import os
import pathlib
import sys

from tools.localstack import process
from tools.localstack import releases


def _home(venv):
    cfg = pathlib.Path(venv, "pyvenv.cfg").read_text()
    return next(line.split("=", 1)[1].strip() for line in cfg.splitlines()
                if line.startswith("home"))


def test_a_stack_virtualenv_is_made_on_the_base_interpreter_not_on_tox_s(tmp_path):
    venv = tmp_path / "stack-venv"
    process.make_venv(str(venv))
    home = os.path.realpath(_home(venv))
    # tox runs this in a virtualenv: what is made must not lean on it (it goes with
    # its clone); outside one both prefixes are the same and the check still holds.
    assert not home.startswith(os.path.realpath(sys.prefix) + os.sep) or \
        sys.prefix == sys.base_prefix, home
    assert os.path.exists(venv / "bin" / "python")


def _recorded(venv, python):
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(python)
    (venv / process.INSTALLED).write_text(json.dumps(
        {"constraints": releases.constraints_file().read_text(), "packages": ["ironic"]}))


def test_a_cached_virtualenv_whose_interpreter_is_gone_is_made_again(tmp_path):
    _recorded(tmp_path / "kept", sys.executable)
    _recorded(tmp_path / "gone", tmp_path / "removed-clone" / "bin" / "python")
    assert process.venv_current(str(tmp_path / "kept"), ["ironic"])
    assert not process.venv_current(str(tmp_path / "gone"), ["ironic"])
