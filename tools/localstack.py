"""Real OpenStack services on loopback, for the functional tests and the demo.

Starts real Placement (openstack-placement under gunicorn, sqlite, noauth2),
real Ironic (all-in-one ``ironic``, fake-hardware, sqlite, noauth,
``rpc_transport = none``, versioned notifications to RabbitMQ), RabbitMQ and
Redis, each on a free loopback port in a private work directory, and stops
what it started.  What is missing is installed first: RabbitMQ and Redis from
Debian's packages, Placement and Ironic into their own virtualenv (they pin
oslo libraries of their own, so they stay out of the reporter's environment).

    python -m tools.localstack up            # start everything, print the config, wait for ^C
    python -m tools.localstack install       # only install what is missing
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

STACK_VENV = os.environ.get(
    "RP_STACK_VENV", os.path.expanduser("~/.cache/rp_reporter/stack-venv"))
# Versions seen working together on this machine; bump them together.
STACK_PACKAGES = ("openstack-placement==16.0.0", "ironic==39.0.0", "gunicorn==27.0.1")
RABBIT_BIN = "/usr/lib/rabbitmq/bin"
SERVICES = ("rabbitmq", "redis", "placement", "ironic")


def terminate(procs, timeout=15):
    """SIGTERM every process still running, then wait for each (agents stop cleanly)."""
    running = [p for p in procs if p is not None and p.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        proc.wait(timeout)


def log(msg):
    print(f"[localstack] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _venv_bin(name):
    return os.path.join(STACK_VENV, "bin", name)


def install():
    """Install what the stack needs and is not there yet (idempotent)."""
    missing_debs = [pkg for pkg, path in (("rabbitmq-server", f"{RABBIT_BIN}/rabbitmq-server"),
                                          ("redis-server", "/usr/bin/redis-server"))
                    if not os.path.exists(path)]
    if missing_debs:
        log(f"installing {' '.join(missing_debs)} with apt-get")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing_debs], check=True, env=env,
                       stdout=subprocess.DEVNULL)
    if not all(os.path.exists(_venv_bin(b)) for b in ("ironic", "placement-manage", "gunicorn")):
        log(f"installing {' '.join(STACK_PACKAGES)} into {STACK_VENV}")
        subprocess.run([sys.executable, "-m", "venv", STACK_VENV], check=True)
        subprocess.run([_venv_bin("pip"), "install", "-q", *STACK_PACKAGES], check=True)


def wait_until(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not come up within {timeout} s")


def wal(db_path):
    """WAL journaling: readers no longer block the writer, so far fewer
    "database is locked" answers from a service on sqlite (persists in the file)."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        db.execute("PRAGMA journal_mode=WAL")


def http_ok(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as e:
        return e.code < 500


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Service:
    """One child process in its own session, so stop() takes its workers too."""

    def __init__(self, name, workdir):
        self.name = name
        self.workdir = workdir
        self.proc = None

    def spawn(self, argv, env=None):
        logf = open(os.path.join(self.workdir, f"{self.name}.log"), "ab")
        self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=logf, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})), start_new_session=True)
        logf.close()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout=15):
        if not self.running():
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(5)


class LocalStack:
    """The four real services, each startable and stoppable on its own."""

    def __init__(self, workdir=None):
        self.workdir = workdir or tempfile.mkdtemp(prefix="rp-stack-")
        os.makedirs(self.workdir, exist_ok=True)
        self.ports = {name: free_port() for name in SERVICES}
        self.ports["rabbitmq_dist"] = free_port()
        self.services = {name: Service(name, self.workdir) for name in SERVICES}

    # -- addresses -------------------------------------------------------
    @property
    def placement_url(self):
        return f"http://127.0.0.1:{self.ports['placement']}"

    @property
    def ironic_url(self):
        return f"http://127.0.0.1:{self.ports['ironic']}"

    @property
    def transport_url(self):
        return f"rabbit://guest:guest@127.0.0.1:{self.ports['rabbitmq']}/"

    @property
    def redis_url(self):
        return f"redis://127.0.0.1:{self.ports['redis']}"

    def reporter_conf(self, **sections):
        """Text of an rp_reporter config file pointing at this stack."""
        conf = {
            "DEFAULT": {"host": "rp-local"},
            "ironic": {"auth_type": "none", "endpoint_override": self.ironic_url},
            "placement": {"auth_type": "admin_token", "endpoint": self.placement_url,
                          "token": "admin"},
            "notifications": {"transport_url": self.transport_url},
        }
        for section, values in sections.items():
            conf.setdefault(section, {}).update(values)
        return "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in vals.items()) + "\n"
                       for s, vals in conf.items())

    # -- lifecycle -------------------------------------------------------
    def start(self, names=SERVICES):
        install()
        for name in names:
            getattr(self, f"start_{name}")()

    def stop(self, names=None):
        for name in reversed(names or SERVICES):
            if name == "rabbitmq":
                self.stop_rabbitmq()
            else:
                self.services[name].stop()

    def restart(self, name):
        self.stop([name])
        getattr(self, f"start_{name}")()

    def _path(self, *parts):
        path = os.path.join(self.workdir, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    # RabbitMQ runs as a private node (own name, ports, data) so it never
    # touches a system broker and several stacks can run side by side.
    def _rabbit_env(self):
        port = self.ports["rabbitmq"]
        base = self._path("rabbitmq", "x")[:-2]
        return {
            "RABBITMQ_NODENAME": f"rpr{port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(port),
            "RABBITMQ_DIST_PORT": str(self.ports["rabbitmq_dist"]),
            "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
            "RABBITMQ_LOG_BASE": f"{base}/log",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
            "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq",
            "RABBITMQ_PID_FILE": f"{base}/pid",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "HOME": base,
        }

    def rabbitmqctl(self, *args, check=False, timeout=30):
        env = dict(os.environ, **self._rabbit_env())
        return subprocess.run([f"{RABBIT_BIN}/rabbitmqctl", "-n", env["RABBITMQ_NODENAME"], *args],
                              env=env, capture_output=True, text=True, check=check, timeout=timeout)

    def start_rabbitmq(self):
        env = self._rabbit_env()
        with open(self._path("rabbitmq", "enabled_plugins"), "w") as f:
            f.write("[].\n")
        self.services["rabbitmq"].spawn([f"{RABBIT_BIN}/rabbitmq-server"], env)
        wait_until(lambda: port_open(self.ports["rabbitmq"]), 60, "RabbitMQ")
        # Bound the agents' listener-pool queues, as an operator would: a pool
        # whose agent is gone expires after an hour and never holds more than
        # 100k messages (reconcile repairs whatever is dropped).
        self.rabbitmqctl("set_policy", "rp-reporter-pools", r"^rp_reporter\.",
                         '{"expires": 3600000, "max-length": 100000}', "--apply-to", "queues",
                         check=True)
        log(f"rabbitmq on {self.ports['rabbitmq']}")

    def stop_rabbitmq(self):
        svc = self.services["rabbitmq"]
        if svc.running():
            with contextlib.suppress(Exception):
                self.rabbitmqctl("stop", timeout=20)
            svc.stop()

    def start_redis(self):
        port = self.ports["redis"]
        self.services["redis"].spawn([
            "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", self._path("redis", "x")[:-2]])
        wait_until(lambda: port_open(port), 30, "Redis")
        log(f"redis on {port}")

    def start_placement(self):
        conf_dir = self._path("placement", "x")[:-2]
        conf = os.path.join(conf_dir, "placement.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n"
                        f"[placement_database]\nconnection = sqlite:///{conf_dir}/placement.db\n"
                        "sqlite_synchronous = false\n"
                        f"[oslo_policy]\npolicy_file = {conf_dir}/policy.yaml\n")
            # The admin token stands in for a service user: reshaper (the bulk
            # inventory path) is a service-role call.
            with open(os.path.join(conf_dir, "policy.yaml"), "w") as f:
                f.write('"placement:reshaper:reshape": "role:admin or role:service"\n')
            subprocess.run([_venv_bin("placement-manage"), "--config-file", conf, "db", "sync"],
                           check=True, capture_output=True)
            wal(os.path.join(conf_dir, "placement.db"))
        port = self.ports["placement"]
        # gunicorn, not uwsgi: uwsgi's --http-socket resets keep-alive requests
        # here.  One worker thread: sqlite's deferred transactions cannot take
        # concurrent writers (they fail with "database is locked" at once), so
        # Placement on sqlite serves one request at a time; clients queue.
        self.services["placement"].spawn(
            [_venv_bin("gunicorn"), "-k", "gthread", "-w", "1", "--threads", "1",
             "-b", f"127.0.0.1:{port}", "placement.wsgi.api:application"],
            {"OS_PLACEMENT_CONFIG_DIR": conf_dir})
        wait_until(lambda: http_ok(self.placement_url + "/", {"X-Auth-Token": "admin"}), 60,
                   "Placement")
        log(f"placement on {port}")

    def start_ironic(self):
        conf_dir = self._path("ironic", "x")[:-2]
        conf = os.path.join(conf_dir, "ironic.conf")
        port = self.ports["ironic"]
        with open(conf, "w") as f:
            f.write(IRONIC_CONF.format(dir=conf_dir, port=port, transport_url=self.transport_url))
        if not os.path.exists(os.path.join(conf_dir, "ironic.db")):
            subprocess.run([_venv_bin("ironic-dbsync"), "--config-file", conf, "create_schema"],
                           check=True, capture_output=True)
            wal(os.path.join(conf_dir, "ironic.db"))
        self.services["ironic"].spawn([_venv_bin("ironic"), "--config-file", conf])
        wait_until(lambda: http_ok(self.ironic_url + "/v1/nodes"), 90, "Ironic")
        log(f"ironic on {port}")


IRONIC_CONF = """\
[DEFAULT]
auth_strategy = noauth
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
enabled_vendor_interfaces = no-vendor
default_network_interface = noop
notification_level = info
versioned_notifications_topics = ironic_versioned_notifications
host = rp-local-conductor
[api]
host_ip = 127.0.0.1
port = {port}
[database]
connection = sqlite:///{dir}/ironic.db
sqlite_synchronous = false
[dhcp]
dhcp_provider = none
[conductor]
automated_clean = false
[oslo_messaging_notifications]
driver = messagingv2
transport_url = {transport_url}
# Without this (default -1: retry forever) every Ironic API call that notifies
# hangs while the broker is down; rp_reporter's reconcile covers what is dropped.
retry = 0
[oslo_concurrency]
lock_path = {dir}/locks
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "install"])
    parser.add_argument("--dir", help="work directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    install()
    if args.action == "install":
        return 0
    stack = LocalStack(args.dir and os.path.abspath(args.dir))
    try:
        stack.start()
        conf = os.path.join(stack.workdir, "rp_reporter.conf")
        with open(conf, "w") as f:
            f.write(stack.reporter_conf())
        print(json.dumps({"config_file": conf, "placement": stack.placement_url,
                          "ironic": stack.ironic_url, "transport_url": stack.transport_url,
                          "redis": stack.redis_url}, indent=2), flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        stack.stop()
        if not args.dir:
            shutil.rmtree(stack.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
