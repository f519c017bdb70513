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

"""The maintained OpenStack releases the stacks run: each service at its series'
latest point release, every other library pinned by the series' OpenStack
upper-constraints (upper_constraints.py).

A process runs one release: ``RP_OPENSTACK_RELEASE`` (the tox environments
``nova-<release>``, ``functional-<release>`` and ``nova-cloud-<release>`` set it;
``python -m tools.localstack --release``), the newest by default.  Each release
has its own stack virtualenvs, so stacks of two releases never share one, and the
release's tox environments and its stacks' virtualenvs install under one file,
``constraints/<release>.txt``.
"""

import collections
import os

from tools.localstack import upper_constraints

ENV = "RP_OPENSTACK_RELEASE"

# nova_traits: a trait nova's resource tracker puts on each node's provider, which the
# tests require of a provider offered to nova's scheduler: OWNER_NOVA from nova 34 on
# (its scheduler asks every root provider for it); before, COMPUTE_NODE (no trait is
# asked, and without it the agents' provider is offered before nova has the node's
# compute record: the build found no host).  nova_compute_runs: on what
# nova-compute's own command runs nova (and the driver's threads): eventlet's green
# threads (31 to 33; 32 and 33 also offer native threads, marked experimental) or
# native threads (34).  rpc_reply_step_s: how a nova service's RPC call waits for its
# reply: oslo.messaging before 18 polls for it every 0.5 s (its lp-2035113 workaround),
# so every call to nova-conductor takes at least 0.5 s; 18 waits on it (0).
Release = collections.namedtuple(
    "Release", "name services nova_traits nova_compute_runs rpc_reply_step_s")

RELEASES = {
    "2025.1": Release("2025.1", {
        "nova": "31.3.1", "ironic": "29.1.0", "openstack-placement": "13.0.1",
        "keystone": "27.1.0", "glance": "30.2.0", "neutron": "26.0.6"}, ("COMPUTE_NODE",),
        "eventlet", 0.5),
    "2025.2": Release("2025.2", {
        "nova": "32.2.1", "ironic": "32.1.0", "openstack-placement": "14.0.0",
        "keystone": "28.1.0", "glance": "31.1.0", "neutron": "27.0.4"}, ("COMPUTE_NODE",),
        "eventlet", 0.5),
    "2026.1": Release("2026.1", {
        "nova": "33.0.2", "ironic": "35.1.0", "openstack-placement": "15.0.0",
        "keystone": "29.1.0", "glance": "32.0.0", "neutron": "28.0.2"}, ("COMPUTE_NODE",),
        "eventlet", 0.5),
    "2026.2": Release("2026.2", {
        "nova": "34.0.0", "ironic": "39.0.0", "openstack-placement": "16.0.0",
        "keystone": "30.0.0", "glance": "33.0.0", "neutron": "29.0.0"}, ("OWNER_NOVA",),
        "threading", 0),
}
NEWEST = "2026.2"
OLDEST = "2025.1"


def current():
    """The release this process runs (RP_OPENSTACK_RELEASE, else the newest)."""
    name = os.environ.get(ENV) or NEWEST
    if name not in RELEASES:
        raise SystemExit(f"{ENV}={name}: not a maintained release "
                         f"(one of {', '.join(RELEASES)})")
    return RELEASES[name]


def pins(*names):
    """Requirements for the packages ``names`` in the current release: a service at
    the release's version, any other at its constraints file's (installer_options)."""
    release = current()
    return tuple(f"{name}=={release.services[name]}" if name in release.services else name
                 for name in names)


def constraints_file(name=None):
    """The constraints file of the release ``name`` (the current one by default)."""
    release = RELEASES[name] if name else current()
    return upper_constraints.HERE / f"{release.name}.txt"


def installer_options():
    """The installer's options for the current release's libraries."""
    return ["--constraint", str(constraints_file())]


def venv_suffix():
    """"" for the newest release (its virtualenvs keep their names), else "-<release>"."""
    name = current().name
    return "" if name == NEWEST else f"-{name}"


def write_constraints(name):
    """Write the release ``name``'s constraints file from its two sources (and, for the
    oldest release, lower-constraints.txt on it)."""
    out = upper_constraints.write(name, RELEASES[name].services)
    if name == OLDEST:
        upper_constraints.LOWER.write_text(upper_constraints.lower(out.read_text()))
    return out
