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

"""nova, the whole of it, for the nova-cloud profile: nova-api (its WSGI
application under gunicorn), nova-scheduler and two nova-conductors from the stack's
virtualenv, on MariaDB behind Keystone, cell_v2 set up by nova-manage; and any
number of nova-compute services (``start_compute``), each its own host with its
own ``[ironic] shard`` and ``compute_driver``.

The layout is nova's superconductor layout for cells v2, as devstack runs it: the
superconductor (nova.conf: the API database, the top-level bus) serves nova-api and
nova-scheduler; cell1's conductor (nova-cell1.conf: cell1's database, no
``[api_database]``) and cell1's nova-computes share a bus of their own (RabbitMQ
virtual host ``cell1``).  A compute service's upcall to the API database, or to the
scheduler, therefore fails here as it does in such a deployment.

The controllers run from the stack's virtualenv, as on a controller that has no
rp_reporter.  Every nova-compute runs by its own command from the environment of
the Python running the stack, which has rp_reporter installed with its ``nova``
extra, as on a compute host an operator set up with ``pip install '.[nova]'``;
stock nova's driver (``ironic.IronicDriver``) loads from there too.
"""

import os
import shutil
import subprocess
import sys

from tools.localstack import keystone
from tools.localstack import mariadb
from tools.localstack import process
from tools.localstack import rabbitmq

NAME = "nova"
CELL = "cell1"  # the first cell of servers; its bus a virtual host of that name
CATALOG = ("compute", "nova", "/v2.1")
# nova's [ironic] credentials must be system-scoped (Ironic 39 shows a project-scoped
# admin no nodes); its writes to nodes (instance_uuid, provisioning) want admin.
EXTRA_ROLES = (("system", "admin"),)
VENV_PACKAGES = ("nova",)  # at the release's version (releases.pins)
# The drivers a compute service can run, by what the topologies call them.
DRIVERS = {"stock": "ironic.IronicDriver", "rp_reporter": "rp_reporter.IronicDriver"}
# Where nova-compute comes from: this Python's environment (rp_reporter[nova]).
COMPUTE_BIN = os.path.dirname(sys.executable)
# The cell conductors' upcall probe (a sitecustomize on their PYTHONPATH), and the HA
# suite's clock shim for a compute service whose pause is hidden from its clocks.
PROBES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "probes")
CLOCK_SHIM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clock_shim")


def venv_ready():
    return os.path.exists(process.venv_bin("nova-conductor"))


def conf_dir(stack):
    return stack.service_dir(NAME)


def cell_transport_url(stack, cell=CELL):
    """A cell's bus: the stack's broker, a virtual host named after the cell."""
    return stack.transport_url.rstrip("/") + "/" + cell


def cell_database(cell):
    """A cell's database in MariaDB (cell1's is ``nova``, as nova-manage sets it up)."""
    return "nova" if cell == CELL else f"nova_{cell}"


def cell_conductor(cell):
    return f"nova-{cell}-conductor"


def common_sections(stack, host, transport_url=None):
    """What every nova service's nova.conf says: the bus (the top-level one unless
    ``transport_url``), the identities, the endpoints (all from Keystone's catalog) and
    nova's periodics as configured on the stack."""
    creds = keystone.credentials(stack, NAME, "service")
    return {
        "DEFAULT": {"transport_url": transport_url or stack.transport_url, "host": host,
                    "debug": "False",
                    "my_ip": "127.0.0.1",
                    # A stopped service's pool threads get this long (default 60 s).
                    "graceful_shutdown_timeout": "5",
                    "state_path": os.path.join(conf_dir(stack), "state", host)},
        "oslo_concurrency": {"lock_path": os.path.join(conf_dir(stack), "locks")},
        "placement": creds,
        "neutron": creds,
        "glance": {"region_name": keystone.REGION, "valid_interfaces": "internal,public"},
        "ironic": keystone.credentials(stack, NAME, "system"),
        "vnc": {"enabled": "False"},
        # As deployments run nova: a versioned notification for every state change (a
        # task state outside nova's enum fails its payload, logged as an exception).
        "notifications": {"notification_format": "versioned",
                          "notify_on_state_change": "vm_and_task_state"},
        # and on one bus, the API's, from every cell (each service would notify on
        # its own bus): where rp_reporter's computes hear the API's service.update
        "oslo_messaging_notifications": {"driver": "messagingv2",
                                         "transport_url": stack.transport_url},
    }


def controller_sections(stack):
    sections = common_sections(stack, "controller")
    sections.update({
        "api_database": {"connection": mariadb.url(stack, "nova_api")},
        "database": {"connection": mariadb.url(stack, "nova")},
        # The scheduler's own discovery of new compute hosts, a backstop: its first
        # run came about a minute late, so wait_mapped runs discover_hosts itself.
        "scheduler": {"discover_hosts_in_cells_interval": "2", "workers": "1",
                      # Tenancy (tests/nova_cloud/test_tenancy.py): a project with a
                      # tenant aggregate is confined to it; the others are not.
                      "limit_tenants_to_placement_aggregate": "True"},
        "conductor": {"workers": "1"},
        # Tests boot more servers than the default quota (10 instances) allows.
        "quota": {"instances": "-1", "cores": "-1", "ram": "-1"},
        # The superconductor layout: the computes' reports of their instances to the
        # scheduler are upcalls it cannot get (nova's cells v2 layout guide).
        "filter_scheduler": {"track_instance_changes": "False"},
    })
    return sections


def cell_conductor_conf(stack, cell):
    """A cell's conductor's nova.conf (its database and bus, no [api_database]),
    written on first use; its path."""
    path = os.path.join(conf_dir(stack), f"nova-{cell}.conf")
    if not os.path.exists(path):
        sections = common_sections(stack, "controller", cell_transport_url(stack, cell))
        sections.update({"database": {"connection": mariadb.url(stack, cell_database(cell))},
                         "conductor": {"workers": "1"}})
        write_conf(path, sections)
    return path


def start_cell_conductor(stack, cell):
    """The cell's bus (a virtual host) and its conductor, with the upcall probe (each
    call that needed the API database, logged: ``probes/sitecustomize.py``)."""
    rabbitmq.ctl(stack, "add_vhost", cell)  # an error when it exists: that is fine
    rabbitmq.ctl(stack, "set_permissions", "-p", cell, "guest", ".*", ".*", ".*", check=True)
    path = os.pathsep.join(p for p in (PROBES, os.environ.get("PYTHONPATH")) if p)
    stack.service(cell_conductor(cell)).spawn(
        [process.venv_bin("nova-conductor"), "--config-file", cell_conductor_conf(stack, cell)],
        env={"PYTHONPATH": path})


def add_cell(stack, cell):
    """Another cell beside cell1 (its own database, bus and conductor), mapped in the
    API database as a deployment adds one (``nova-manage cell_v2 create_cell``)."""
    mariadb.create(stack, cell_database(cell))
    conf = cell_conductor_conf(stack, cell)
    # --local_cell: the cell's own database only (without it nova-manage syncs cell0
    # too, through the API database this configuration has not).
    subprocess.run([process.venv_bin("nova-manage"), "--config-file", conf, "db", "sync",
                    "--local_cell"], check=True, capture_output=True)
    manage(stack, "cell_v2", "create_cell", "--name", cell, "--transport-url",
           cell_transport_url(stack, cell), "--database_connection",
           mariadb.url(stack, cell_database(cell)))
    start_cell_conductor(stack, cell)
    # nova-api, nova-scheduler and the superconductor read the cells once: restarted, as
    # nova's cells v2 guide asks after a cell is added.
    process.stop_all(controllers(stack))
    start_controllers(stack)
    process.log(f"{cell}: its database, bus and {cell_conductor(cell)}")


def write_conf(path, sections):
    with open(path, "w") as f:
        f.write(process.ini(sections))


def manage(stack, *args):
    """nova-manage with the controllers' nova.conf; its output."""
    return subprocess.run([process.venv_bin("nova-manage"), "--config-file",
                           os.path.join(conf_dir(stack), "nova.conf"), *args],
                          check=True, capture_output=True, text=True).stdout


def unmapped(stack, hosts):
    """The hosts of ``hosts`` not mapped to a cell (``nova-manage cell_v2 list_hosts``)."""
    listed = manage(stack, "cell_v2", "list_hosts")
    return [host for host in hosts if f" {host} " not in listed]


def wait_mapped(stack, hosts, timeout=180, by_service=False):
    """Until each nova-compute of ``hosts`` has reported its compute nodes and is mapped
    to its cell (``nova-manage cell_v2 discover_hosts``, as deployment tools run it once
    a new compute service is up: the scheduler's own periodic discovery may come a minute
    later, and a boot before it fails with "Host ... is not mapped to any cell").
    All at once: each try is two nova-manage runs of a few seconds each, so waiting
    for six hosts one by one cost the nova-cloud fixture about 100 s.  ``by_service``:
    ``--by-service``, nova's answer for Ironic: discovery by compute node never maps a
    service the ring gave no node (3 nodes over 2 services: all 3 on one, one time in 4)."""
    def mapped():
        manage(stack, "cell_v2", "discover_hosts", *(["--by-service"] if by_service else []))
        return not unmapped(stack, hosts)
    process.wait_until(mapped, timeout, f"nova-compute {', '.join(hosts)} mapped to a cell",
                       interval=1)


def start(stack):
    """nova-api, nova-conductor, nova-scheduler; on first start the databases and
    cell_v2 (cell0 and cell1)."""
    base = conf_dir(stack)
    conf = os.path.join(base, "nova.conf")
    fresh = not os.path.exists(conf)
    if fresh:
        sections = controller_sections(stack)
        sections["keystone_authtoken"] = keystone.authtoken_options(stack, NAME)
        write_conf(conf, sections)
        shutil.copy(os.path.join(process.stack_venv(), "etc", "nova", "api-paste.ini"), base)
        manage(stack, "api_db", "sync")
        manage(stack, "cell_v2", "map_cell0", "--database_connection",
               mariadb.url(stack, "nova_cell0"))
        manage(stack, "cell_v2", "create_cell", "--name", CELL,
               "--transport-url", cell_transport_url(stack))
        manage(stack, "db", "sync")
    start_cell_conductor(stack, CELL)
    start_controllers(stack)


def start_controllers(stack):
    """nova-api, nova-scheduler and the superconductor (the top of the layout)."""
    base = conf_dir(stack)
    conf = os.path.join(base, "nova.conf")
    for command in ("nova-conductor", "nova-scheduler"):
        stack.service(command).spawn([process.venv_bin(command), "--config-file", conf])
    # nova-api loads its paste pipeline from the first of OS_NOVA_CONFIG_FILES.
    process.serve_wsgi(stack.services[NAME], stack.ports[NAME], process.venv_bin("gunicorn"),
                       "nova.wsgi.osapi_compute:application", base,
                       # nova 31 to 33 patch eventlet at import unless told not to:
                       # in gunicorn's threaded worker that hung every worker after
                       # its first answer (a WSGI server's nova-api runs unpatched).
                       {"OS_NOVA_CONFIG_DIR": base,
                        "OS_NOVA_CONFIG_FILES": "api-paste.ini;nova.conf",
                        "OS_NOVA_DISABLE_EVENTLET_PATCHING": "1"},
                       ("-w", "1", "--threads", "8"))
    process.wait_until(lambda: process.http_ok(stack.url(NAME) + "/v2.1"), 120, "nova-api")
    process.log(f"nova-api on {stack.ports[NAME]}, nova-scheduler, nova-conductor (the "
                f"superconductor)")


def controllers(stack):
    return [stack.service(name) for name in ("nova-scheduler", "nova-conductor", NAME)]


def stop(stack):
    process.stop_all([service for name, service in stack.services.items()
                      if name.startswith("nova-compute-")]
                     + [service for name, service in stack.services.items()
                        if name.startswith("nova-cell") and name.endswith("-conductor")]
                     + controllers(stack))


def compute_conf(stack, host, driver, shard, sections, cell=CELL):
    """The nova.conf of compute service ``host`` of ``cell``: no database (its cell's
    conductor is its way to one), its cell's bus, ``compute_driver`` one of DRIVERS, its
    own ``[ironic] shard`` (none when empty: nova's ring over its live services), then
    ``sections`` over it (per key)."""
    conf = common_sections(stack, host, cell_transport_url(stack, cell))
    conf["DEFAULT"]["compute_driver"] = DRIVERS[driver]
    # nova's late check of a server group's policy is an upcall to the API database
    # (nova's cells v2 layout guide: off where computes cannot reach it).
    conf["workarounds"] = {"disable_group_policy_check_upcall": "True"}
    # Ironic's own API server closes a kept-alive connection after 10 s idle, and a
    # request reusing it just then fails before any answer (nova's build then aborts,
    # "Failure prepping block device": once in a whole CI run); keystoneauth's retry of
    # a failed connection, the same for stock nova's driver and ours.
    conf["ironic"]["connect_retries"] = 2
    if shard:
        conf["ironic"]["shard"] = shard
    for section, values in sections.items():
        conf.setdefault(section, {}).update(values)
    return conf


def start_compute(stack, host, driver, shard, env=None, cell=CELL, bin_dir=COMPUTE_BIN,
                  **sections):
    """Start (or restart with a new configuration) nova-compute ``host``, with ``env``
    over this process's environment, from the environment of ``bin_dir`` (by default
    this Python's); returns its log file.  Readiness is the caller's: os-services shows
    it up."""
    executable = os.path.join(bin_dir, "nova-compute")
    if not os.path.exists(executable):
        raise RuntimeError(f"no nova-compute in {bin_dir}: the nova-cloud profile runs "
                           "nova-compute from this Python's environment; install rp_reporter "
                           "there with its nova extra (pip install '.[nova]')")
    path = os.path.join(conf_dir(stack), f"compute-{host}.conf")
    write_conf(path, compute_conf(stack, host, driver, shard, sections, cell))
    service = stack.service(f"nova-compute-{host}")
    service.stop()
    service.spawn([executable, "--config-file", path], env=env)
    return os.path.join(stack.workdir, f"nova-compute-{host}.log")
