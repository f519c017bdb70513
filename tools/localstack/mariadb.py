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

"""MariaDB, the production profile's database: a private mariadbd (not the system
service) with its own datadir and socket, 127.0.0.1 on a free port, one database
and user per service.  Placement then runs several gunicorn workers."""

import os
import subprocess

from tools.localstack import process

NAME = "mariadb"
# The services' MySQL driver, in the stack's virtualenv.
VENV_PACKAGES = ("PyMySQL",)  # at the release's version (releases.pins)
# Every database a stack can keep here, a user each (nova's three are nova's own:
# its API database, its cell1 and cell0).
DATABASES = ("keystone", "placement", "ironic", "glance", "neutron", "nova_api", "nova",
             "nova_cell0")


def venv_ready():
    return process.venv_has("pymysql")


def socket_path(stack):
    return os.path.join(stack.workdir, NAME, "mysqld.sock")


def url(stack, service):
    """The SQLAlchemy URL of a service's database."""
    return (f"mysql+pymysql://{service}:{service}-db-secret@127.0.0.1:"
            f"{stack.ports[NAME]}/{service}?charset=utf8mb4")


def client(stack, sql, database=None):
    """Run SQL (read from stdin, so it may be long) as MariaDB's root (unix socket
    authentication), in ``database`` if given, and return its output."""
    return subprocess.run(["mariadb", "--no-defaults", "-S", socket_path(stack), "-u", "root",
                           "-N", "-B", *([database] if database else [])], input=sql,
                          check=True, capture_output=True, text=True).stdout


def create(stack, *databases):
    """Each database with a user of its own (``url`` names both)."""
    client(stack, "".join(
        f"CREATE DATABASE {svc} CHARACTER SET utf8mb4;"
        f"CREATE USER '{svc}'@'%' IDENTIFIED BY '{svc}-db-secret';"
        f"GRANT ALL PRIVILEGES ON {svc}.* TO '{svc}'@'%';"
        for svc in databases))


def start(stack):
    base = stack.service_dir(NAME)
    datadir = os.path.join(base, "data")
    fresh = not os.path.exists(datadir)
    if fresh:
        subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}",
                        "--user=root", "--skip-test-db",
                        "--auth-root-authentication-method=socket"],
                       check=True, capture_output=True)
    stack.services[NAME].spawn([
        "/usr/sbin/mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
        f"--socket={socket_path(stack)}", f"--port={stack.ports[NAME]}",
        "--bind-address=127.0.0.1", f"--pid-file={base}/mariadbd.pid",
        f"--log-error={base}/error.log", "--skip-name-resolve", "--max-connections=1000",
        "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
        "--innodb-buffer-pool-size=256M",
        # A test machine's disk: flush the log once a second, not at every commit.
        "--innodb-flush-log-at-trx-commit=2"])
    process.wait_until(lambda: client(stack, "SELECT 1").strip() == "1", 60, "MariaDB")
    if fresh:
        create(stack, *DATABASES)
    process.log(f"mariadb on {stack.ports[NAME]}")

