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

"""What a process runs, read from the process (``/proc``), not from the command that
started it: a restart "on the new release" from an unchanged virtualenv, or an old tree
shadowed by the working directory, runs other code than its caller meant.

* ``release``: the release of the OpenStack project a service runs, from the versions
  installed beside the compiled modules the process (or a worker it forked) has mapped;
* ``imported_from``: the file a process imported rp_reporter from, which the
  ``sitecustomize`` of ``IMPORTS_SITE`` records when that directory is on its
  ``PYTHONPATH`` (``imports_env``).
"""

import importlib.metadata
import json
import os
import pathlib
import re

from tools.localstack import releases
from tools.localstack import upper_constraints

IMPORTS_SITE = str(pathlib.Path(__file__).with_name("imports_site"))
IMPORTS_DIR = "RP_TEST_IMPORTS_DIR"  # the directory it writes <pid>.json to
SITE_PACKAGES = re.compile(r"(/\S+/site-packages)/")


def _family(pid):
    """``pid`` and its descendants (a WSGI server's workers), parent first."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        found.append(current)
        for task in pathlib.Path(f"/proc/{current}/task").glob("*/children"):
            try:
                queue += [int(child) for child in task.read_text().split()]
            except OSError:  # the task ended meanwhile
                continue
    return found


def site_packages(pid):
    """The site-packages directory whose compiled modules ``pid`` or one of its
    workers has mapped, or None (the process is gone, or maps none)."""
    for member in _family(pid):
        try:
            maps = pathlib.Path(f"/proc/{member}/maps").read_text()
        except OSError:
            continue
        found = SITE_PACKAGES.search(maps)
        if found:
            return found.group(1)
    return None


def installed(site, distribution):
    """The version of ``distribution`` installed in ``site``, or None."""
    wanted = upper_constraints.canonical(distribution)
    return next((found.version for found in importlib.metadata.distributions(path=[site])
                 if upper_constraints.canonical(found.metadata["Name"]) == wanted), None)


def release(pid, distribution):
    """The release (``releases.RELEASES``) whose ``distribution`` the process runs, or
    "<distribution> <version>" for a version no release pins, or None."""
    site = site_packages(pid)
    version = site and installed(site, distribution)
    if not version:
        return None
    return next((r.name for r in releases.RELEASES.values()
                 if r.services.get(distribution) == version), f"{distribution} {version}")


def imports_env(directory, env=None):
    """``env`` (a process's extra environment) with ``IMPORTS_SITE`` ahead of the rest
    of its ``PYTHONPATH``: the process records in ``directory`` where it imported
    rp_reporter from (``imported_from``)."""
    env = dict(env or {})
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (IMPORTS_SITE, env.get("PYTHONPATH")) if p)
    env[IMPORTS_DIR] = str(directory)
    return env


def imported_from(directory, pid):
    """The file process ``pid`` (started with ``imports_env(directory)``) imported
    rp_reporter from, or None while it has not."""
    try:
        return json.loads(pathlib.Path(directory, f"{pid}.json").read_text())["origin"]
    except (OSError, KeyError, ValueError):
        return None
