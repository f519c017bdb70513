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

"""Each series' pins: OpenStack's own upper-constraints.txt for it, and a short overlay.

Deployments (kolla, OpenStack-Ansible, the distributions) build a series' services
from openstack/requirements' ``upper-constraints.txt`` of that series, so the tests do
too.  Three files a series, beside this module in ``constraints/``:

* ``openstack/<series>.txt``: OpenStack's file, unchanged below a header that names
  the branch and the commit it was read at;
* ``overlay/<series>.txt``: what OpenStack's file lacks (the series' services are
  never in it; a few test and benchmark tools) or, for a series whose final file was
  not published yet, what its services need newer; every line says why;
* ``<series>.txt``: the two merged, with the services of the release table
  (releases.py) at the top: the file tox, the stacks' virtualenvs and the README's
  install line use.  Made again with ``python -m tools.localstack constraints``; a unit
  test keeps it equal to what the two sources make.
"""

import pathlib
import re

HERE = pathlib.Path(__file__).resolve().parent / "constraints"


def canonical(name):
    """A distribution's name as the installers compare them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _name(line):
    """The distribution a requirement line is about, or None for a comment."""
    line = line.split("#", 1)[0].strip()
    return canonical(re.split(r"[=<>!~;\s\[]", line, maxsplit=1)[0]) if line else None


def merge(openstack, overlay, services):
    """The merged file's text: ``services`` ({name: version}) and the ``overlay`` text's
    lines first, then every line of the ``openstack`` text on a distribution neither
    names (a line of those replaces OpenStack's lines on it, markers and all)."""
    own = [f"{name}=={version}  # the series' service (releases.py)"
           for name, version in services.items()]
    own += [line for line in overlay.splitlines() if _name(line)]
    replaced = {_name(line) for line in own}
    kept = [line for line in openstack.splitlines()
            if _name(line) and _name(line) not in replaced]
    return "\n".join([*own, *kept]) + "\n"


def header(series):
    return (f"# OpenStack {series}: openstack/{series}.txt (OpenStack's upper-constraints.txt)"
            f" with overlay/{series}.txt\n# and the release's services; made by"
            " python -m tools.localstack constraints. Do not edit.\n")


def merged(series, services):
    """The text ``<series>.txt`` should hold."""
    return header(series) + merge((HERE / "openstack" / f"{series}.txt").read_text(),
                                  (HERE / "overlay" / f"{series}.txt").read_text(), services)


def write(series, services):
    out = HERE / f"{series}.txt"
    out.write_text(merged(series, services))
    return out


# The lower bounds: each of the project's requirements at its minimum, everything else at
# the oldest series' pins (the Pythons and libraries the minimums must work with).
LOWER = HERE.parent.parent.parent / "lower-constraints.txt"
REQUIREMENTS = ("requirements.txt", "test-requirements.txt")


def minimums(text):
    """{distribution: its lower bound} of a requirements file's text."""
    from packaging.requirements import Requirement
    found = {}
    for line in text.splitlines():
        if _name(line):
            requirement = Requirement(line.split("#", 1)[0].strip())
            (low,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
            found[canonical(requirement.name)] = low
    return found


def lower(oldest):
    """The text lower-constraints.txt should hold, ``oldest`` the oldest series' merged
    file: the project's minimums, then every other pin of that file."""
    root = LOWER.parent
    ours = {}
    for name in REQUIREMENTS:
        ours.update(minimums((root / name).read_text()))
    return ("# The project's lower bounds (requirements.txt, test-requirements.txt), every\n"
            "# other library at the oldest series' pins; made by python -m tools.localstack"
            " constraints.\n" + merge(oldest, "\n".join(f"{name}=={low}  # our minimum"
                                      for name, low in ours.items()), {}))


def pinned(text, environment=None):
    """{distribution: version} the constraints text pins for the running Python (or
    for ``environment``, a dict of marker variables): lines whose marker does not hold
    are left out."""
    from packaging.requirements import Requirement
    pins = {}
    for line in text.splitlines():
        if not _name(line):
            continue
        requirement = Requirement(line.split("#", 1)[0].strip())
        if requirement.marker and not requirement.marker.evaluate(environment):
            continue
        (spec,) = requirement.specifier
        pins[canonical(requirement.name)] = spec.version
    return pins


def frozen(text):
    """{distribution: version} of ``pip freeze --all``'s text (for a wheel installed from
    a file, where it came from)."""
    return {canonical(name): version for name, version in (
        re.split(r"==| @ ", line, maxsplit=1) for line in text.splitlines()
        if "==" in line or " @ " in line)}


def moved(installed, pins):
    """{distribution: (installed, pinned)} for each of ``installed`` ({name: version})
    that the ``pins`` ({name: version}) put at another version."""
    installed = {canonical(name): version for name, version in installed.items()}
    return {name: (version, pins[name]) for name, version in installed.items()
            if name in pins and version != pins[name]}
