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

"""Real OpenStack services on loopback, for the functional tests and the demo.

Starts real Placement (openstack-placement under gunicorn, sqlite, noauth2),
real Ironic (all-in-one ``ironic``, fake-hardware, sqlite, noauth,
``rpc_transport = none``, versioned notifications to RabbitMQ), RabbitMQ and
Redis, each on a free loopback port in a private work directory, and stops
what it started.  What is missing is installed first: RabbitMQ and Redis from
Debian's packages, Placement and Ironic into their own virtualenv (they pin
oslo libraries of their own, so they stay out of the reporter's environment).

That is the embedded profile (the default).  Three knobs change the shape, each
on its own: ``database="mariadb"`` (a private MariaDB child process, one
database per service; Placement then runs several gunicorn workers),
``auth="keystone"`` (a real Keystone, Placement and Ironic behind
``[keystone_authtoken]`` with their release policy defaults, the identities of
``IDENTITIES``) and ``coordination="etcd"`` (a private etcd instead of Redis).
``LocalStack.production()`` is all three: the shape operators run.  The fourth
knob, ``nova="cloud"`` (profile ``nova-cloud``: production plus it), puts a whole
nova in front: Glance (file store, one tiny image), real neutron-server (ML2, no
agent), nova-api, nova-conductor and nova-scheduler on MariaDB behind Keystone,
cell_v2 set up; nova-compute services start one by one (``start_compute``), each
its own host, shard and driver, from this Python's environment.

    python -m tools.localstack up            # start everything, print the config, wait for ^C
    python -m tools.localstack up --profile production      # MariaDB + Keystone + etcd
    python -m tools.localstack up --database mariadb        # any knob on its own
    python -m tools.localstack up --profile nova-cloud      # production + a whole nova
    python -m tools.localstack install [--profile production]  # only install what is missing

One module per service (rabbitmq, redis, etcd, mariadb, keystone, placement,
ironic, glance, neutron, nova), process.py for what they share (processes, ports, the virtualenv),
stack.py for LocalStack and the profiles that compose them, __main__.py for
the command line.  This module only names what others import.
"""

from tools.localstack.keystone import ADMIN_PASSWORD
from tools.localstack.keystone import IDENTITIES
from tools.localstack.keystone import REGION
from tools.localstack.keystone import TOKEN_EXPIRATION
from tools.localstack.process import Service
from tools.localstack.process import exit_on_sigterm
from tools.localstack.process import free_port
from tools.localstack.process import log
from tools.localstack.process import port_open
from tools.localstack.process import terminate
from tools.localstack.releases import RELEASES
from tools.localstack.stack import KNOBS
from tools.localstack.stack import PRODUCTION
from tools.localstack.stack import PROFILES
from tools.localstack.stack import LocalStack
from tools.localstack.stack import install

__all__ = ["ADMIN_PASSWORD", "IDENTITIES", "KNOBS", "PRODUCTION", "PROFILES", "REGION",
           "RELEASES", "TOKEN_EXPIRATION", "LocalStack", "Service", "exit_on_sigterm",
           "free_port", "install", "log", "port_open", "terminate"]
