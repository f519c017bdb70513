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

"""A running nova-cloud stack's control plane upgraded in place to another release, the
way each project's upgrade guide says, one service at a time, the computes left running:

* Keystone and Glance: the schema expanded and migrated, the service restarted on the
  new code, the schema contracted (their rolling upgrades);
* Placement, Ironic, neutron: the schema expanded by the new code while the old serves,
  the service restarted (neutron's schema then contracted);
* nova: every service's RPC to the computes pinned to the oldest compute's version
  (``[upgrade_levels] compute = auto``) and the service user's token configured
  (``nova_sections``), the API and cell databases synced by the new
  code while the old runs, then the cell's conductor, the superconductor, the scheduler
  and the API restarted on it.

``finish`` is what the guides ask once every service runs the new release: the online
data migrations, and ``nova-status upgrade check``.  The nova-computes are the caller's:
an operator takes them one at a time (the operator guide's upgrade section).
"""

import os
import shutil
import subprocess
import time

from tools.localstack import glance
from tools.localstack import ironic
from tools.localstack import keystone
from tools.localstack import neutron
from tools.localstack import nova
from tools.localstack import placement
from tools.localstack import process
from tools.localstack import releases
from tools.localstack import stack as stack_module

# nova-compute's requests to Ironic ride through a restart of Ironic's API: one refused
# (503, "Resource temporarily unavailable, please retry", or no connection) is sent again
# 0.5 s later, then 1, 2, 4 ... (keystoneauth's backoff: 31.5 s over 6 tries).  Without
# them, a build reserving its node just then failed (the upgrade's boot loop, Ironic down
# 16 s); the operator guide recommends them for the upgrade.
IRONIC_RETRIES = {"ironic": {"status_code_retries": "6", "connect_retries": "6"}}


def nova_sections(stack):
    """What every nova service's nova.conf gains for the upgrade: its RPC to the computes
    pinned to the oldest running compute's version (nova's rolling upgrade guide), and the
    service user's token sent with the user's (``nova-status upgrade check`` fails
    without it); the computes get them through their own sections."""
    return {"upgrade_levels": {"compute": "auto"},
            "service_user": dict(keystone.credentials(stack, nova.NAME, "service"),
                                 send_service_user_token="True")}


def _run(*command):
    return subprocess.run([*command], check=True, capture_output=True, text=True).stdout


def _conf(stack, name, filename):
    return os.path.join(stack.service_dir(name), filename)


def prepare_nova(stack, cell=nova.CELL):
    """nova_sections in the controllers' and the cell conductor's nova.conf (read at
    their next start)."""
    for path in (_conf(stack, nova.NAME, "nova.conf"), nova.cell_conductor_conf(stack, cell)):
        process.update_ini(path, nova_sections(stack))


def _restart(stack, name):
    """Stop service ``name`` and start it on the current release's code; the seconds it
    was down."""
    began = time.monotonic()
    stack.stop([name])
    stack.start_service(name)
    return round(time.monotonic() - began, 1)


def control_plane(stack, release):
    """Upgrade the stack's services (not its nova-computes) to ``release``; returns
    {service: seconds it was down}."""
    os.environ[releases.ENV] = release  # every venv_bin from here on is the new release's
    stack.release = releases.current()
    stack_module.install(**stack.shape)
    down = {}

    manage = [process.venv_bin("keystone-manage"), "--config-file",
              _conf(stack, keystone.NAME, "keystone.conf"), "db_sync"]
    _run(*manage, "--expand")
    _run(*manage, "--migrate")
    down[keystone.NAME] = _restart(stack, keystone.NAME)
    _run(*manage, "--contract")

    conf = _conf(stack, glance.NAME, "glance-api.conf")
    glance_manage = [process.venv_bin("glance-manage"), "--config-file", conf]
    _run(*glance_manage, "db", "expand")
    _run(*glance_manage, "db", "migrate")
    shutil.copy(os.path.join(process.stack_venv(), "etc", "glance", "glance-api-paste.ini"),
                stack.service_dir(glance.NAME))
    down[glance.NAME] = _restart(stack, glance.NAME)
    _run(*glance_manage, "db", "contract")

    # Placement's, Ironic's and neutron's schema changes add and never take away: the new
    # code expands them while the old serves (Ironic's rolling upgrade guide; neutron's
    # expand, then contract once every server runs the new code).
    _run(process.venv_bin("placement-manage"), "--config-file",
         _conf(stack, placement.NAME, "placement.conf"), "db", "sync")
    down[placement.NAME] = _restart(stack, placement.NAME)
    _run(process.venv_bin("ironic-dbsync"), "--config-file",
         _conf(stack, ironic.NAME, "ironic.conf"), "upgrade")
    down[ironic.NAME] = _restart(stack, ironic.NAME)
    neutron_manage = [neutron.bin_path("neutron-db-manage"), "--config-file",
                      _conf(stack, neutron.NAME, "neutron.conf"), "upgrade"]
    _run(*neutron_manage, "--expand")
    shutil.copy(os.path.join(neutron.venv(), "etc", "neutron", "api-paste.ini"),
                stack.service_dir(neutron.NAME))
    down[neutron.NAME] = _restart(stack, neutron.NAME)
    _run(*neutron_manage, "--contract")

    prepare_nova(stack)
    nova.manage(stack, "api_db", "sync")  # the new code's schema, while the old runs
    nova.manage(stack, "db", "sync")
    began = time.monotonic()
    process.stop_all([stack.service(nova.cell_conductor(nova.CELL)), *nova.controllers(stack)])
    shutil.copy(os.path.join(process.stack_venv(), "etc", "nova", "api-paste.ini"),
                nova.conf_dir(stack))
    nova.start_cell_conductor(stack, nova.CELL)
    nova.start_controllers(stack)
    down[nova.NAME] = round(time.monotonic() - began, 1)
    process.log(f"control plane on {release}: down (s) {down}")
    return down


def finish(stack):
    """Once every service runs the new release: each project's online data migrations,
    then nova's own check of the upgrade; nova-status's output."""
    nova.manage(stack, "db", "online_data_migrations")
    _run(process.venv_bin("placement-manage"), "--config-file",
         _conf(stack, placement.NAME, "placement.conf"), "db", "online_data_migrations")
    _run(process.venv_bin("ironic-dbsync"), "--config-file",
         _conf(stack, ironic.NAME, "ironic.conf"), "online_data_migrations")
    status = subprocess.run([process.venv_bin("nova-status"), "--config-file",
                             _conf(stack, nova.NAME, "nova.conf"), "upgrade", "check"],
                            capture_output=True, text=True)
    # 0 success, 1 a warning, 2 a failure (nova-status's own codes)
    return status.returncode, status.stdout
