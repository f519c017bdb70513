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
``LocalStack.production()`` is all three: the shape operators run.

    python -m tools.localstack up            # start everything, print the config, wait for ^C
    python -m tools.localstack up --profile production      # MariaDB + Keystone + etcd
    python -m tools.localstack up --database mariadb        # any knob on its own
    python -m tools.localstack install [--profile production]  # only install what is missing
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

from tools import fleet

STACK_VENV = os.environ.get(
    "RP_STACK_VENV", os.path.expanduser("~/.cache/rp_reporter/stack-venv"))
# Versions seen working together on this machine; bump them together.
STACK_PACKAGES = ("openstack-placement==16.0.0", "ironic==39.0.0", "gunicorn==27.0.1")
# Installed into the same virtualenv only when a profile needs them (they
# co-install with the above without changing any of its pins).
KEYSTONE_PACKAGES = ("keystone==30.0.0",)
MARIADB_PACKAGES = ("PyMySQL==1.2.4",)
RABBIT_BIN = "/usr/lib/rabbitmq/bin"
SERVICES = ("rabbitmq", "redis", "placement", "ironic")  # the embedded profile, in start order
PRODUCTION = {"database": "mariadb", "auth": "keystone", "coordination": "etcd"}
REGION = "RegionOne"
# Token lifetime, seconds: short, so a test can see a token expire under a running
# agent, yet over 120: keystoneauth renews a token with under 120 s left, so at 120
# or less every request re-authenticates (seen here: 4 token requests per validation
# in keystonemiddleware, each about 0.4 s of bcrypt).  Clients renew after 60 s.
TOKEN_EXPIRATION = 180
ADMIN_PASSWORD = "rp-admin-secret"
# The identities tests use (domain Default): name -> (scope, role).  "system"
# means system_scope=all; otherwise the project, "service".
IDENTITIES = {
    "rp-system-reader": ("system", "reader"),   # the right Ironic credentials for the reporter
    "rp-system-member": ("system", "member"),   # Ironic writes (resource-class set)
    "rp-service": ("service", "service"),       # right for Placement, wrong for Ironic
    "rp-admin": ("service", "admin"),
    "rp-reader": ("service", "reader"),
}
# The services' own users for [keystone_authtoken], role service in project service.
SERVICE_USERS = ("placement", "ironic")


def terminate(procs, timeout=15):
    """SIGTERM every process still running, then wait for each (agents stop cleanly)."""
    running = [p for p in procs if p is not None and p.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{' '.join(map(str, proc.args))[:120]}: no exit {timeout} s after SIGTERM; killed")
            proc.kill()
            proc.wait()


def log(msg):
    print(f"[localstack] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _venv_bin(name):
    return os.path.join(STACK_VENV, "bin", name)


def _venv_has(module):
    return subprocess.run([_venv_bin("python"), "-c", f"import {module}"],
                          capture_output=True).returncode == 0


def install(database="sqlite", auth="noauth", coordination="redis"):
    """Install what the stack (of this shape) needs and is not there yet (idempotent)."""
    debs = [("rabbitmq-server", f"{RABBIT_BIN}/rabbitmq-server")]
    debs.append(("redis-server", "/usr/bin/redis-server") if coordination == "redis"
                else ("etcd-server", "/usr/bin/etcd"))
    if database == "mariadb":
        debs.append(("mariadb-server", "/usr/sbin/mariadbd"))
    missing_debs = [pkg for pkg, path in debs if not os.path.exists(path)]
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
    extra = []
    if auth == "keystone" and not os.path.exists(_venv_bin("keystone-manage")):
        extra += KEYSTONE_PACKAGES
    if database == "mariadb" and not _venv_has("pymysql"):
        extra += MARIADB_PACKAGES
    if extra:
        log(f"installing {' '.join(extra)} into {STACK_VENV}")
        subprocess.run([_venv_bin("pip"), "install", "-q", *STACK_PACKAGES, *extra], check=True)


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
    """The real services, each startable and stoppable on its own.

    ``database`` ("sqlite" or "mariadb"), ``auth`` ("noauth" or "keystone") and
    ``coordination`` ("redis" or "etcd") compose; the defaults are the embedded
    profile, ``LocalStack.production()`` is MariaDB + Keystone + etcd.
    """

    def __init__(self, workdir=None, database="sqlite", auth="noauth", coordination="redis"):
        for knob, value, allowed in (("database", database, ("sqlite", "mariadb")),
                                     ("auth", auth, ("noauth", "keystone")),
                                     ("coordination", coordination, ("redis", "etcd"))):
            if value not in allowed:
                raise ValueError(f"{knob} must be one of {allowed}, not {value!r}")
        self.database, self.auth, self.coordination = database, auth, coordination
        self.workdir = workdir or tempfile.mkdtemp(prefix="rp-stack-")
        os.makedirs(self.workdir, exist_ok=True)
        self.names = ("rabbitmq", coordination,
                      *(("mariadb",) if database == "mariadb" else ()),
                      *(("keystone",) if auth == "keystone" else ()),
                      "placement", "ironic")
        self.ports = {name: free_port() for name in self.names}
        self.ports["rabbitmq_dist"] = free_port()
        if coordination == "etcd":
            self.ports["etcd_peer"] = free_port()
        self.services = {name: Service(name, self.workdir) for name in self.names}
        self._admin_auth = {}

    @classmethod
    def production(cls, workdir=None, **overrides):
        """The shape operators run: MariaDB, Keystone, etcd (any knob can be overridden)."""
        return cls(workdir, **dict(PRODUCTION, **overrides))

    # -- addresses -------------------------------------------------------
    @property
    def placement_url(self):
        return f"http://127.0.0.1:{self.ports['placement']}"

    @property
    def ironic_url(self):
        return f"http://127.0.0.1:{self.ports['ironic']}"

    @property
    def keystone_url(self):
        """Keystone's root (the catalog's identity endpoint is this + /v3)."""
        return f"http://127.0.0.1:{self.ports['keystone']}"

    @property
    def transport_url(self):
        return f"rabbit://guest:guest@127.0.0.1:{self.ports['rabbitmq']}/"

    @property
    def redis_url(self):
        return f"redis://127.0.0.1:{self.ports['redis']}"

    @property
    def etcd_url(self):
        """etcd's client URL (plain http)."""
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def coordination_url(self):
        """The tooz backend URL for [coordination] backend_url."""
        if self.coordination == "etcd":
            return f"etcd3+http://127.0.0.1:{self.ports['etcd']}"
        return self.redis_url

    @property
    def mariadb(self):
        """Where MariaDB listens: host, port, socket, and the database URL of each service."""
        return {"host": "127.0.0.1", "port": self.ports["mariadb"],
                "socket": os.path.join(self.workdir, "mariadb", "mysqld.sock"),
                "databases": {svc: self.database_url(svc)
                              for svc in ("keystone", "placement", "ironic")}}

    def database_url(self, service):
        """The SQLAlchemy URL a service (keystone, placement, ironic) uses."""
        if self.database == "mariadb":
            return (f"mysql+pymysql://{service}:{service}-db-secret@127.0.0.1:"
                    f"{self.ports['mariadb']}/{service}?charset=utf8mb4")
        return f"sqlite:///{self.workdir}/{service}/{service}.db"

    # -- identities (keystone profile) -----------------------------------
    def credentials(self, name):
        """keystoneauth options for an [ironic] or [placement] section, as identity ``name``
        (one of IDENTITIES) would use them; endpoints come from the catalog."""
        scope, _ = IDENTITIES[name]
        creds = {"auth_type": "password", "auth_url": self.keystone_url + "/v3",
                 "username": name, "password": f"{name}-secret", "user_domain_name": "Default",
                 "region_name": REGION, "valid_interfaces": "internal,public"}
        if scope == "system":
            creds["system_scope"] = "all"
        else:
            creds.update(project_name=scope, project_domain_name="Default")
        return creds

    def admin_auth(self, service_type):
        """What fleet.Ironic / fleet.Placement authenticate with: None on noauth (they send
        the noauth headers), else a refreshing Keystone token of the bootstrap admin,
        system-scoped for Ironic ("baremetal"), project-scoped for Placement ("placement")."""
        if self.auth != "keystone":
            return None
        if service_type not in self._admin_auth:
            scope = ({"system": {"all": True}} if service_type == "baremetal"
                     else {"project": {"name": "admin", "domain": {"name": "Default"}}})
            self._admin_auth[service_type] = fleet.KeystoneToken(
                self.keystone_url + "/v3", "admin", ADMIN_PASSWORD, scope)
        return self._admin_auth[service_type]

    def reporter_conf(self, **sections):
        """Text of an rp_reporter config file pointing at this stack.  Sections passed in
        override per key; an [ironic]/[placement] override that names a scope (project or
        system) replaces the default's scope."""
        if self.auth == "keystone":
            ironic = self.credentials("rp-system-reader")
            placement = self.credentials("rp-service")
        else:
            ironic = {"auth_type": "none", "endpoint_override": self.ironic_url}
            placement = {"auth_type": "admin_token", "endpoint": self.placement_url,
                         "token": "admin"}
        conf = {
            "DEFAULT": {"host": "rp-local"},
            "ironic": ironic,
            "placement": placement,
            "notifications": {"transport_url": self.transport_url},
        }
        if self.coordination == "etcd":
            conf["coordination"] = {"backend_url": self.coordination_url}
        for section, values in sections.items():
            current = conf.setdefault(section, {})
            if SCOPE_KEYS & set(values):
                for key in SCOPE_KEYS:
                    current.pop(key, None)
            current.update(values)
        return "".join(f"[{s}]\n" + "".join(f"{k} = {v}\n" for k, v in vals.items()) + "\n"
                       for s, vals in conf.items())

    # -- lifecycle -------------------------------------------------------
    def start(self, names=None):
        install(self.database, self.auth, self.coordination)
        for name in names or self.names:
            getattr(self, f"start_{name}")()

    def stop(self, names=None):
        for name in reversed(names or self.names):
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

    def _dir(self, name):
        return self._path(name, "x")[:-2]

    # RabbitMQ runs as a private node (own name, ports, data) so it never
    # touches a system broker and several stacks can run side by side.
    def _rabbit_env(self):
        port = self.ports["rabbitmq"]
        base = self._dir("rabbitmq")
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
            "--appendonly", "no", "--dir", self._dir("redis")])
        wait_until(lambda: port_open(port), 30, "Redis")
        log(f"redis on {port}")

    def start_etcd(self):
        """A one-member etcd cluster with its own data dir, client and peer URLs on loopback."""
        client, peer = self.etcd_url, f"http://127.0.0.1:{self.ports['etcd_peer']}"
        self.services["etcd"].spawn([
            "etcd", "--name", "rp-local", "--data-dir", os.path.join(self._dir("etcd"), "data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"rp-local={peer}", "--initial-cluster-state", "new",
            "--initial-cluster-token", f"rp-local-{self.ports['etcd']}"])
        wait_until(lambda: json.loads(urllib.request.urlopen(
            client + "/health", timeout=2).read())["health"] == "true", 30, "etcd")
        log(f"etcd on {self.ports['etcd']}")

    def mariadb_client(self, sql):
        """Run SQL as MariaDB's root (unix socket authentication) and return its output."""
        return subprocess.run(["mariadb", "--no-defaults", "-S", self.mariadb["socket"], "-u",
                               "root", "-N", "-B", "-e", sql],
                              check=True, capture_output=True, text=True).stdout

    def start_mariadb(self):
        """A private mariadbd (not the system service): own datadir and socket, 127.0.0.1 on
        a free port, one database and user per service."""
        base = self._dir("mariadb")
        datadir = os.path.join(base, "data")
        fresh = not os.path.exists(datadir)
        if fresh:
            subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}",
                            "--user=root", "--skip-test-db",
                            "--auth-root-authentication-method=socket"],
                           check=True, capture_output=True)
        self.services["mariadb"].spawn([
            "/usr/sbin/mariadbd", "--no-defaults", f"--datadir={datadir}", "--user=root",
            f"--socket={self.mariadb['socket']}", f"--port={self.ports['mariadb']}",
            "--bind-address=127.0.0.1", f"--pid-file={base}/mariadbd.pid",
            f"--log-error={base}/error.log", "--skip-name-resolve", "--max-connections=1000",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
            "--innodb-buffer-pool-size=256M",
            # A test machine's disk: flush the log once a second, not at every commit.
            "--innodb-flush-log-at-trx-commit=2"])
        wait_until(lambda: self.mariadb_client("SELECT 1").strip() == "1", 60, "MariaDB")
        if fresh:
            self.mariadb_client("".join(
                f"CREATE DATABASE {svc} CHARACTER SET utf8mb4;"
                f"CREATE USER '{svc}'@'%' IDENTIFIED BY '{svc}-db-secret';"
                f"GRANT ALL PRIVILEGES ON {svc}.* TO '{svc}'@'%';"
                for svc in ("keystone", "placement", "ironic")))
        log(f"mariadb on {self.ports['mariadb']}")

    def start_keystone(self):
        """Keystone under gunicorn; on first start also its database, keys, bootstrap, the
        services and endpoints of Placement and Ironic, their users and IDENTITIES."""
        conf_dir = self._dir("keystone")
        conf = os.path.join(conf_dir, "keystone.conf")
        fresh = not os.path.exists(conf)
        if fresh:
            with open(conf, "w") as f:
                f.write(KEYSTONE_CONF.format(dir=conf_dir, db=self.database_url("keystone"),
                                             expiration=TOKEN_EXPIRATION))
            manage = [_venv_bin("keystone-manage"), "--config-file", conf]
            for step in (["db_sync"],
                         ["fernet_setup", "--keystone-user", "root", "--keystone-group", "root"],
                         ["credential_setup", "--keystone-user", "root",
                          "--keystone-group", "root"],
                         ["bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                          "--bootstrap-region-id", REGION,
                          *(arg for iface in ("admin", "internal", "public")
                            for arg in (f"--bootstrap-{iface}-url", self.keystone_url + "/v3"))]):
                subprocess.run(manage + step, check=True, capture_output=True)
        # Keystone's WSGI module parses sys.argv with oslo.config, which then refuses
        # gunicorn's arguments: serve it through a shim that hides them.
        with open(os.path.join(conf_dir, "keystone_wsgi.py"), "w") as f:
            f.write("import sys\nsys.argv = sys.argv[:1]\n"
                    "from keystone.wsgi.api import application  # noqa: E402,F401\n")
        self.services["keystone"].spawn(
            [_venv_bin("gunicorn"), "-k", "gthread", "-w", "2", "--threads", "2",
             "--pythonpath", conf_dir, "-b", f"127.0.0.1:{self.ports['keystone']}",
             "keystone_wsgi:application"],
            {"OS_KEYSTONE_CONFIG_FILES": conf})
        wait_until(lambda: http_ok(self.keystone_url + "/v3"), 60, "Keystone")
        if fresh:
            self._register()
        log(f"keystone on {self.ports['keystone']}")

    def _register(self):
        """Services, endpoints (public and internal, RegionOne), the service users and the
        test identities, through Keystone's API as the bootstrap admin (system scope)."""
        http = fleet.session({}, auth=fleet.KeystoneToken(
            self.keystone_url + "/v3", "admin", ADMIN_PASSWORD, {"system": {"all": True}}))
        api = self.keystone_url + "/v3"

        def post(path, kind, body):
            return fleet.call(http, "POST", api + path, (201,), json={kind: body})[kind]

        roles = {r["name"]: r["id"]
                 for r in fleet.call(http, "GET", api + "/roles", (200,))["roles"]}
        if "service" not in roles:
            roles["service"] = post("/roles", "role", {"name": "service"})["id"]
        project = post("/projects", "project", {"name": "service", "domain_id": "default"})["id"]
        for service_type, name, url in (("placement", "placement", self.placement_url),
                                        ("baremetal", "ironic", self.ironic_url)):
            service = post("/services", "service", {"type": service_type, "name": name})["id"]
            for interface in ("public", "internal"):
                post("/endpoints", "endpoint", {"service_id": service, "interface": interface,
                                                "url": url, "region_id": REGION})
        users = {name: ("service", "service") for name in SERVICE_USERS}
        users.update(IDENTITIES)
        for name, (scope, role) in users.items():
            user = post("/users", "user", {"name": name, "password": self._password(name),
                                           "domain_id": "default"})["id"]
            target = "/system" if scope == "system" else f"/projects/{project}"
            fleet.call(http, "PUT", f"{api}{target}/users/{user}/roles/{roles[role]}", (204,))

    def _password(self, user):
        return f"{user}-secret"

    def _authtoken(self, user):
        """The [keystone_authtoken] section of a service behind Keystone."""
        return KEYSTONE_AUTHTOKEN.format(url=self.keystone_url, user=user,
                                         password=self._password(user), region=REGION)

    def start_placement(self):
        conf_dir = self._dir("placement")
        conf = os.path.join(conf_dir, "placement.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                if self.auth == "keystone":
                    # The release's policy defaults (reshaper wants the service role).
                    f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = keystone\n"
                            + self._authtoken("placement"))
                else:
                    f.write("[DEFAULT]\ndebug = False\n[api]\nauth_strategy = noauth2\n"
                            f"[oslo_policy]\npolicy_file = {conf_dir}/policy.yaml\n")
                    # The admin token stands in for a service user: reshaper (the bulk
                    # inventory path) is a service-role call.
                    with open(os.path.join(conf_dir, "policy.yaml"), "w") as p:
                        p.write('"placement:reshaper:reshape": "role:admin or role:service"\n')
                f.write(f"[placement_database]\nconnection = {self.database_url('placement')}\n")
                if self.database == "sqlite":
                    f.write("sqlite_synchronous = false\n")
                else:
                    f.write("max_pool_size = 10\nmax_overflow = 20\n")
            subprocess.run([_venv_bin("placement-manage"), "--config-file", conf, "db", "sync"],
                           check=True, capture_output=True)
            if self.database == "sqlite":
                wal(os.path.join(conf_dir, "placement.db"))
        port = self.ports["placement"]
        # gunicorn, not uwsgi: uwsgi's --http-socket resets keep-alive requests
        # here.  On sqlite one worker thread: sqlite's deferred transactions cannot
        # take concurrent writers (they fail with "database is locked" at once), so
        # Placement on sqlite serves one request at a time; clients queue.  On
        # MariaDB it is served as a deployment would on this 2-core machine.
        workers = ("-w", "1", "--threads", "1") if self.database == "sqlite" else (
            "-w", "2", "--threads", "4")
        self.services["placement"].spawn(
            [_venv_bin("gunicorn"), "-k", "gthread", *workers,
             "-b", f"127.0.0.1:{port}", "placement.wsgi.api:application"],
            {"OS_PLACEMENT_CONFIG_DIR": conf_dir})
        wait_until(lambda: http_ok(self.placement_url + "/", {"X-Auth-Token": "admin"}), 60,
                   "Placement")
        log(f"placement on {port}")

    def start_ironic(self):
        conf_dir = self._dir("ironic")
        conf = os.path.join(conf_dir, "ironic.conf")
        port = self.ports["ironic"]
        with open(conf, "w") as f:
            f.write(IRONIC_CONF.format(dir=conf_dir, port=port, transport_url=self.transport_url,
                                       auth_strategy=self.auth, db=self.database_url("ironic")))
            if self.database == "sqlite":
                f.write("sqlite_synchronous = false\n")  # [database] is the template's last
            if self.auth == "keystone":
                f.write(self._authtoken("ironic"))
        marker = os.path.join(conf_dir, "schema-created")
        if not os.path.exists(marker):
            subprocess.run([_venv_bin("ironic-dbsync"), "--config-file", conf, "create_schema"],
                           check=True, capture_output=True)
            if self.database == "sqlite":
                wal(os.path.join(conf_dir, "ironic.db"))
            open(marker, "w").close()
        self.services["ironic"].spawn([_venv_bin("ironic"), "--config-file", conf])
        wait_until(lambda: http_ok(self.ironic_url + "/v1/nodes"), 90, "Ironic")
        log(f"ironic on {port}")


SCOPE_KEYS = {"project_name", "project_id", "project_domain_name", "project_domain_id",
              "domain_name", "domain_id", "system_scope"}

KEYSTONE_CONF = """\
[DEFAULT]
debug = False
[database]
connection = {db}
[token]
provider = fernet
expiration = {expiration}
[fernet_tokens]
key_repository = {dir}/fernet-keys
[fernet_receipts]
key_repository = {dir}/fernet-keys
[credential]
key_repository = {dir}/credential-keys
"""

KEYSTONE_AUTHTOKEN = """\
[keystone_authtoken]
www_authenticate_uri = {url}/v3
auth_url = {url}/v3
auth_type = password
username = {user}
password = {password}
user_domain_name = Default
project_name = service
project_domain_name = Default
region_name = {region}
"""

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
enabled_vendor_interfaces = no-vendor
default_network_interface = noop
notification_level = info
versioned_notifications_topics = ironic_versioned_notifications
host = rp-local-conductor
[api]
host_ip = 127.0.0.1
port = {port}
[dhcp]
dhcp_provider = none
[conductor]
automated_clean = false
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


def exit_on_sigterm():
    """SIGTERM unwinds like Ctrl-C, so the stacks' ``finally`` blocks stop what they
    started (by default it ends the process there and leaves every service running)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "install"])
    parser.add_argument("--dir", help="work directory (default: a new temporary one)")
    parser.add_argument("--profile", choices=["embedded", "production"], default="embedded",
                        help="production: MariaDB + Keystone + etcd (the knobs below override)")
    parser.add_argument("--database", choices=["sqlite", "mariadb"])
    parser.add_argument("--auth", choices=["noauth", "keystone"])
    parser.add_argument("--coordination", choices=["redis", "etcd"])
    args = parser.parse_args(argv)
    shape = dict(PRODUCTION) if args.profile == "production" else {}
    shape.update({k: getattr(args, k) for k in ("database", "auth", "coordination")
                  if getattr(args, k)})
    install(**shape)
    if args.action == "install":
        return 0
    stack = LocalStack(args.dir and os.path.abspath(args.dir), **shape)
    exit_on_sigterm()
    try:
        stack.start()
        conf = os.path.join(stack.workdir, "rp_reporter.conf")
        with open(conf, "w") as f:
            f.write(stack.reporter_conf())
        shown = {"config_file": conf, "placement": stack.placement_url,
                 "ironic": stack.ironic_url, "transport_url": stack.transport_url,
                 "coordination": stack.coordination_url}
        if stack.auth == "keystone":
            shown["keystone"] = stack.keystone_url
            shown["credentials"] = {name: stack.credentials(name) for name in IDENTITIES}
        if stack.database == "mariadb":
            shown["mariadb"] = stack.mariadb
        print(json.dumps(shown, indent=2), flush=True)
        while True:
            signal.pause()  # until SIGINT or SIGTERM unwinds to the finally below
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
        if not args.dir:
            shutil.rmtree(stack.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
