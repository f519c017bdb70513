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

"""Loaded by every Python started with this directory on its PYTHONPATH
(tools/localstack/running.py's ``imports_env``): when the process imports rp_reporter,
it writes the file it is loaded from to ``$RP_TEST_IMPORTS_DIR/<pid>.json``.  It finds
the module as the import would (the finders after this one), so the file is the one
that runs."""

import importlib.util
import json
import os
import sys

PACKAGE = "rp_reporter"


class _Recorder:
    def find_spec(self, name, path=None, target=None):
        if name != PACKAGE:
            return None
        sys.meta_path.remove(self)  # once, and not asked again by the lookup below
        spec = importlib.util.find_spec(name)
        directory = os.environ.get("RP_TEST_IMPORTS_DIR")
        if spec is not None and directory:
            with open(os.path.join(directory, f"{os.getpid()}.json"), "w") as f:
                json.dump({"origin": spec.origin, "argv": sys.argv}, f)
        return spec


sys.meta_path.insert(0, _Recorder())
