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

"""Neutron, the nova-cloud profile's network service: real neutron-server (its
WSGI application under gunicorn, ML2 with no mechanism driver and no agent) on
MariaDB behind Keystone, in a virtualenv of its own (its oslo pins are not
Ironic's).  Servers there boot with ``--nic none``, so nova creates no port; it
still lists the server's ports, networks and floating IPs when it deletes one,
and those reads are what this answers (the router plugin serves floating IPs)."""

import os
import shutil
import subprocess

from tools.localstack import keystone
from tools.localstack import process
from tools.localstack import releases

NAME = "neutron"
CATALOG = ("network", "neutron", "")


def venv():
    """neutron's own virtualenv, of the current release."""
    return os.path.join(os.path.dirname(process.stack_venv()),
                        f"neutron-venv{releases.venv_suffix()}")

NEUTRON_CONF = """\
[DEFAULT]
debug = False
core_plugin = ml2
service_plugins = router
auth_strategy = keystone
api_paste_config = {dir}/api-paste.ini
state_path = {dir}/state
notify_nova_on_port_status_changes = False
notify_nova_on_port_data_changes = False
[database]
connection = {db}
[ml2]
mechanism_drivers =
type_drivers = flat
tenant_network_types =
extension_drivers =
[ml2_type_flat]
flat_networks = *
[oslo_concurrency]
lock_path = {dir}/locks
"""


def bin_path(name):
    return os.path.join(venv(), "bin", name)


# pyroute2: neutron 29 imports it to build its schema (neutron-db-manage) but no longer
# lists it; under OpenStack's pins nothing else brings it.
PACKAGES = ("neutron", "gunicorn", "PyMySQL", "pyroute2")


def install():
    """neutron into its own virtualenv, when it is not there yet (or was installed
    under other pins, or without one of PACKAGES)."""
    packages = releases.pins(*PACKAGES)
    if not (os.path.exists(bin_path("neutron-db-manage"))
            and process.venv_current(venv(), packages)):
        process.venv_install(venv(), packages, create=True)


def start(stack):
    conf_dir = stack.service_dir(NAME)
    conf = os.path.join(conf_dir, "neutron.conf")
    if not os.path.exists(conf):
        shutil.copy(os.path.join(venv(), "etc", "neutron", "api-paste.ini"), conf_dir)
        with open(conf, "w") as f:
            f.write(NEUTRON_CONF.format(dir=conf_dir, db=stack.database_url(NAME)))
            f.write(keystone.authtoken(stack, NAME))
        subprocess.run([bin_path("neutron-db-manage"), "--config-file", conf, "upgrade",
                        "heads"], check=True, capture_output=True)
    # Every model mapped before the first request: listing ports reads a relationship
    # (Port.port_forwardings) that only a model module no ML2 driver of ours imports
    # defines, so a fresh server's first port listing failed with AttributeError.
    process.serve_wsgi(stack.services[NAME], stack.ports[NAME], bin_path("gunicorn"),
                       "neutron.wsgi.api:application", conf_dir,
                       {"OS_NEUTRON_CONFIG_DIR": conf_dir,
                        "OS_NEUTRON_CONFIG_FILES": "neutron.conf"},
                       # nova-api asks for the ports of a page of servers in one query
                       # string: 100 servers' is 4.8 kB, past gunicorn's default request
                       # line (4,094 bytes; at most 8,190), and a page is up to 1,000
                       # servers: no limit, as behind a deployment's web server.
                       ("-w", "1", "--threads", "4", "--limit-request-line", "0"),
                       after_import="import neutron.db.migration.models.head  # noqa: F401\n"
                                    "from sqlalchemy import orm\norm.configure_mappers()\n")
    process.wait_until(lambda: process.http_ok(stack.url(NAME) + "/"), 90, "neutron-server")
    process.log(f"neutron on {stack.ports[NAME]}")
