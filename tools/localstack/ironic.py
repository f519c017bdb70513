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

"""Ironic (all-in-one ``ironic``, fake-hardware, ``rpc_transport = none``), the
service the reporter reads: versioned notifications to RabbitMQ, noauth on the
embedded profile, behind Keystone on the production one."""

import configparser
import contextlib
import os
import sqlite3
import subprocess

from tools.localstack import keystone
from tools.localstack import process

NAME = "ironic"
# (service type, name, path) in the Keystone catalog.
CATALOG = ("baremetal", "ironic", "")

IRONIC_CONF = """\
[DEFAULT]
auth_strategy = {auth_strategy}
rpc_transport = none
enabled_hardware_types = fake-hardware
enabled_boot_interfaces = fake
enabled_deploy_interfaces = fake
enabled_management_interfaces = fake
enabled_power_interfaces = fake
enabled_bios_interfaces = no-bios
enabled_console_interfaces = no-console
enabled_firmware_interfaces = no-firmware
enabled_inspect_interfaces = no-inspect
enabled_network_interfaces = noop
enabled_raid_interfaces = no-raid
enabled_rescue_interfaces = no-rescue
enabled_vendor_interfaces = {vendor_interfaces}
default_network_interface = noop
notification_level = info
versioned_notifications_topics = ironic_versioned_notifications
host = rp-local-conductor
# A stop waits this long for the API's kept-alive connections to close: with
# oslo.service's 60 s, Ironic outlasted the stack's own wait (15 s) at every stop and
# was killed (about 15 s a stack's teardown, and a restart's).
graceful_shutdown_timeout = 3
[api]
host_ip = 127.0.0.1
port = {port}
{api_options}[dhcp]
dhcp_provider = none
[conductor]
# On in the nova-cloud profile: a node freed by a server's delete goes through
# cleaning before it is available again, as in production (fake-hardware cleans at once).
automated_clean = {automated_clean}
# Off: fake-hardware's power state cannot drift, and at 10,000 nodes the sync
# (every 120 s by default) outlasts its interval and keeps one core busy for
# good, beside whatever figure the bench is taking.
sync_power_state_interval = 0
[nova]
send_power_notifications = false
[oslo_messaging_notifications]
driver = messagingv2
transport_url = {transport_url}
# Without this (default -1: retry forever) every Ironic API call that notifies
# hangs while the broker is down; rp_reporter's reconcile covers what is dropped.
retry = 0
[oslo_concurrency]
lock_path = {dir}/locks
[database]
connection = {db}
"""


# Under a whole nova, automated cleaning takes CLEANING_SECONDS, as it takes time on real
# hardware (minutes): fake-hardware's one clean step (the fake vendor interface's, at
# priority 1) sleeps that long.  Instant cleaning would end before nova-compute's delete
# has released the server's allocation (it polls Ironic every 2 s), an order real
# hardware never shows.
CLEANING_SECONDS = 3
CLEANING_TAKES_TIME = f"""\
[DEFAULT]
default_vendor_interface = fake
[fake]
vendor_delay = {CLEANING_SECONDS}
"""


def start(stack):
    conf_dir = stack.service_dir(NAME)
    conf = os.path.join(conf_dir, "ironic.conf")
    port = stack.ports[NAME]
    with open(conf, "w") as f:
        f.write(IRONIC_CONF.format(dir=conf_dir, port=port, transport_url=stack.transport_url,
                                   auth_strategy=stack.auth, db=stack.database_url(NAME),
                                   automated_clean=stack.nova == "cloud",
                                   api_options=(f"max_limit = {stack.ironic_max_limit}\n"
                                                if stack.ironic_max_limit else ""),
                                   vendor_interfaces=("fake,no-vendor" if stack.nova == "cloud"
                                                      else "no-vendor")))
        if stack.database == "sqlite":
            f.write("sqlite_synchronous = false\n")  # [database] is the template's last
        if stack.auth == "keystone":
            f.write(keystone.authtoken(stack, NAME))
        if stack.nova == "cloud":
            f.write(CLEANING_TAKES_TIME)
        if stack.rabbit_options:
            f.write("[oslo_messaging_rabbit]\n" + "".join(
                f"{key} = {value}\n" for key, value in stack.rabbit_options.items()))
    marker = os.path.join(conf_dir, "schema-created")
    if not os.path.exists(marker):
        # In a session of its own, as a service under systemd: with the bus's
        # use_queue_manager, oslo.messaging before 18.3 reads its process group
        # leader's /proc entry at the start (FileNotFoundError where that leader, a
        # test runner's, has exited; seen with 2026.2's pins, 18.2.0).
        done = subprocess.run([process.venv_bin("ironic-dbsync"), "--config-file", conf,
                               "create_schema"], capture_output=True, text=True,
                              start_new_session=True)
        if done.returncode:
            raise RuntimeError(f"ironic-dbsync create_schema exited {done.returncode}: "
                               f"{done.stderr[-3000:]}")
        if stack.database == "sqlite":
            process.wal(os.path.join(conf_dir, "ironic.db"))
        open(marker, "w").close()
    stack.services[NAME].spawn([process.venv_bin("ironic"), "--config-file", conf])
    process.wait_until(lambda: process.http_ok(stack.ironic_url + "/v1/nodes"), 90, "Ironic")
    process.log(f"ironic on {port}")


def start_conductor_group(stack, group):
    """A second ``ironic`` (API and conductor, as the stack's own) on the same database,
    its conductor in conductor group ``group``; returns (its Service, its API's URL).
    Ironic moves a node to a conductor group only through a conductor of that group,
    and with ``rpc_transport = none`` only the API in that conductor's own process
    reaches it: a node is moved through the URL returned here."""
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(os.path.join(stack.service_dir(NAME), "ironic.conf"))
    name, port = f"{NAME}-{group}", process.free_port()
    conf["DEFAULT"]["host"] = f"rp-local-conductor-{group}"
    conf["api"]["port"] = str(port)
    conf["conductor"]["conductor_group"] = group
    path = os.path.join(stack.service_dir(NAME), f"{name}.conf")
    with open(path, "w") as f:
        conf.write(f)
    service = stack.service(name)
    service.spawn([process.venv_bin("ironic"), "--config-file", path])
    url = f"http://127.0.0.1:{port}"
    process.wait_until(lambda: process.http_ok(url + "/v1/nodes"), 90, f"Ironic of {group}")
    return service, url


def backdate(stack, uuids, seconds):
    """Nodes ``uuids`` written ``seconds`` earlier than they were (their created_at and
    updated_at, in Ironic's sqlite database): a fleet enrolled a while ago, without the
    wait (a listing takes nodes written within its slack for clocks as new)."""
    if stack.database != "sqlite":
        raise NotImplementedError("backdate: the embedded profile's sqlite database only")
    with contextlib.closing(sqlite3.connect(
            os.path.join(stack.service_dir(NAME), "ironic.db"))) as db, db:
        shift = f"-{int(seconds)} seconds"
        db.executemany(
            "UPDATE nodes SET created_at = strftime('%Y-%m-%d %H:%M:%f', created_at, ?), "
            "updated_at = strftime('%Y-%m-%d %H:%M:%f', updated_at, ?) WHERE uuid = ?",
            [(shift, shift, uuid) for uuid in uuids])
