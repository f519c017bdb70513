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

"""RabbitMQ, the notification bus Ironic sends to and the agents listen on.

It runs as a private node (own name, ports, data) so it never touches a system
broker and several stacks can run side by side.  In the ``bus = tls-quorum`` shape it
also listens for TLS (a certificate authority and a server certificate the stack
makes with openssl), and every client of the stack talks to it there."""

import contextlib
import os
import subprocess

from tools.localstack import process

NAME = "rabbitmq"
RABBIT_BIN = "/usr/lib/rabbitmq/bin"
EXTRA_PORTS = ("rabbitmq_dist", "rabbitmq_tls")


def env(stack):
    port = stack.ports[NAME]
    base = stack.service_dir(NAME)
    return {
        "RABBITMQ_NODENAME": f"rpr{port}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(stack.ports["rabbitmq_dist"]),
        "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
        "RABBITMQ_LOG_BASE": f"{base}/log",
        "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
        "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq",
        "RABBITMQ_PID_FILE": f"{base}/pid",
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "HOME": base,
    }


def ctl(stack, *args, check=False, timeout=30):
    """rabbitmqctl against this stack's node."""
    node_env = dict(os.environ, **env(stack))
    return subprocess.run([f"{RABBIT_BIN}/rabbitmqctl", "-n", node_env["RABBITMQ_NODENAME"],
                           *args], env=node_env, capture_output=True, text=True, check=check,
                          timeout=timeout)


# The largest message the test broker takes (RabbitMQ 4's default is 16 MiB): no message
# of the agents' may come near it at any fleet size (shared_listing's pages).
MAX_MESSAGE_BYTES = 1 << 20
# With a whole nova (the nova-cloud profile) the broker carries nova's own messages too,
# and nova-conductor's reply listing one nova-compute's compute nodes grows with them
# (1,315,286 bytes at 1,000 nodes: over 1 MiB, every periodic of that service failed on
# its MessagingTimeout).  That broker keeps RabbitMQ 4's default, as a deployment's does.
NOVA_MAX_MESSAGE_BYTES = 16 << 20


def ca_file(stack):
    """The certificate authority a client verifies the broker's TLS listener with."""
    return os.path.join(stack.service_dir(NAME), "ca.pem")


SERVER_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
"""


def make_certificates(base):
    """A certificate authority (ca.pem) and the broker's certificate for 127.0.0.1 signed
    by it (server.pem, server.key), made once per stack."""
    if os.path.exists(os.path.join(base, "server.pem")):
        return
    with open(os.path.join(base, "server.ext"), "w") as f:
        f.write(SERVER_EXTENSIONS)
    for command in (
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-subj", "/CN=rp-reporter test CA", "-keyout", "ca.key", "-out", "ca.pem",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
             "-keyout", "server.key", "-out", "server.csr"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "30", "-extfile", "server.ext", "-out", "server.pem"]):
        subprocess.run(["openssl", *command], cwd=base, check=True, capture_output=True)


def tls_listener(stack, base):
    """rabbitmq.conf's lines for a TLS listener on loopback (no client certificate)."""
    make_certificates(base)
    return (f"listeners.ssl.1 = 127.0.0.1:{stack.ports['rabbitmq_tls']}\n"
            f"ssl_options.cacertfile = {base}/ca.pem\n"
            f"ssl_options.certfile = {base}/server.pem\n"
            f"ssl_options.keyfile = {base}/server.key\n"
            "ssl_options.verify = verify_none\n"
            "ssl_options.fail_if_no_peer_cert = false\n")


def start(stack):
    base = stack.service_dir(NAME)
    tls = stack.bus == "tls-quorum"
    with open(os.path.join(base, "enabled_plugins"), "w") as f:
        f.write("[].\n")
    with open(os.path.join(base, "rabbitmq.conf"), "w") as f:
        largest = NOVA_MAX_MESSAGE_BYTES if stack.nova == "cloud" else MAX_MESSAGE_BYTES
        f.write(f"max_message_size = {largest}\n")
        if tls:
            f.write(tls_listener(stack, base))
    stack.services[NAME].spawn([f"{RABBIT_BIN}/rabbitmq-server"], env(stack))
    process.wait_until(lambda: process.port_open(stack.ports[NAME]), 60, "RabbitMQ")
    if tls:
        process.wait_until(lambda: process.port_open(stack.ports["rabbitmq_tls"]), 30,
                           "RabbitMQ's TLS listener")
    # Bound the agents' listener-pool queues, as an operator would: a pool
    # whose agent is gone expires after an hour and never holds more than
    # 100k messages (reconcile repairs whatever is dropped).
    ctl(stack, "set_policy", "rp-reporter-pools", r"^rp_reporter\.",
        '{"expires": 3600000, "max-length": 100000}', "--apply-to", "queues", check=True)
    process.log(f"rabbitmq on {stack.ports[NAME]}")


def stop(stack):
    """rabbitmqctl stop first (the broker shuts down in order), then the processes."""
    service = stack.services[NAME]
    if service.running():
        with contextlib.suppress(Exception):
            ctl(stack, "stop", timeout=20)
        service.stop()
