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

"""Placement (openstack-placement under gunicorn), the service the reporter writes
to: noauth2 with an admin token on the embedded profile, behind Keystone on the
production one."""

import os
import subprocess

from tools.localstack import keystone
from tools.localstack import process

NAME = "placement"
# [placement] allocation_conflict_retry_count under a whole nova (see write_conf);
# RP_PLACEMENT_ALLOCATION_TRIES=10 (Placement's default) shows the double bookings.
ALLOCATION_TRIES = int(os.environ.get("RP_PLACEMENT_ALLOCATION_TRIES", 1))
# (service type, name, path) in the Keystone catalog.
CATALOG = ("placement", "placement", "")


def write_conf(stack, conf_dir, conf):
    with open(conf, "w") as f:
        if stack.auth == "keystone":
            # The release's policy defaults (reshaper wants the service role).
            f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = keystone\n"
                    + keystone.authtoken(stack, NAME))
        else:
            f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n"
                    f"[oslo_policy]\npolicy_file = {conf_dir}/policy.yaml\n")
            # The admin token stands in for a service user: reshaper (the bulk
            # inventory path) is a service-role call.
            with open(os.path.join(conf_dir, "policy.yaml"), "w") as p:
                p.write('"placement:reshaper:reshape": "role:admin or role:service"\n')
        f.write(f"[placement_database]\nconnection = {stack.database_url(NAME)}\n")
        if stack.database == "sqlite":
            f.write("sqlite_synchronous = false\n")
        else:
            f.write("max_pool_size = 10\nmax_overflow = 20\n")
        if stack.nova == "cloud":
            # Placement's server-side retry of an allocation write that met a generation
            # conflict re-checks capacity against usages read earlier in the same
            # transaction: concurrent boots then booked one single-unit provider twice
            # (nova's driver refuses the second build: "Chosen ironic node ... is not
            # available").  With one try the conflict goes back to nova's scheduler,
            # which claims its next host (doc/source/admin/topologies.md).
            f.write(f"[placement]\nallocation_conflict_retry_count = {ALLOCATION_TRIES}\n")


def start(stack):
    conf_dir = stack.service_dir(NAME)
    conf = os.path.join(conf_dir, "placement.conf")
    if not os.path.exists(conf):
        write_conf(stack, conf_dir, conf)
        subprocess.run([process.venv_bin("placement-manage"), "--config-file", conf, "db",
                        "sync"], check=True, capture_output=True)
        if stack.database == "sqlite":
            process.wal(os.path.join(conf_dir, "placement.db"))
    port = stack.ports[NAME]
    # gunicorn, not uwsgi: uwsgi's --http-socket resets keep-alive requests
    # here.  On sqlite one worker thread: sqlite's deferred transactions cannot
    # take concurrent writers (they fail with "database is locked" at once), so
    # Placement on sqlite serves one request at a time; clients queue.  On
    # MariaDB it is served as a deployment would on this 2-core machine.
    workers = ("-w", "1", "--threads", "1") if stack.database == "sqlite" else (
        "-w", "2", "--threads", "4")
    # a benchmark's row may set Placement's own idle keep-alive (nova-storm)
    keep_alive = getattr(stack, "placement_keep_alive_s", None)
    gunicorn = process.GUNICORN if keep_alive is None else (
        *process.GUNICORN[:-1], str(keep_alive))
    stack.services[NAME].spawn(
        [process.venv_bin("gunicorn"), *gunicorn, *workers,
         "-b", f"127.0.0.1:{port}", "placement.wsgi.api:application"],
        {"OS_PLACEMENT_CONFIG_DIR": conf_dir})
    process.wait_until(lambda: process.http_ok(stack.placement_url + "/",
                                               {"X-Auth-Token": "admin"}), 60, "Placement")
    process.log(f"placement on {port}")
