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

"""LocalStack: the services of one stack, composed from its shape.

A shape gives each knob of KNOBS one of its choices; a profile (PROFILES) is a
named shape.  SERVICES lists every service module in start order with the
shapes that run it.  A service module has NAME and start(stack); it may have
stop(stack) (when ending its processes is not enough), EXTRA_PORTS (port names
beside its own), and VENV_PACKAGES with venv_ready() (what it adds to the stack's
virtualenv); its system packages are bindep.txt's lines of its NAME's profile.

A new profile is its service modules, their rows in SERVICES, and its entry in
PROFILES (with a knob of its own in KNOBS when no existing knob tells its
services apart).
"""

import os
import secrets
import tempfile

from tools.localstack import etcd
from tools.localstack import glance
from tools.localstack import ironic
from tools.localstack import keystone
from tools.localstack import mariadb
from tools.localstack import neutron
from tools.localstack import nova
from tools.localstack import placement
from tools.localstack import process
from tools.localstack import rabbitmq
from tools.localstack import redis
from tools.localstack import releases

# Each knob of a shape and its choices, the embedded profile's first.
KNOBS = {"database": ("sqlite", "mariadb"),
         "auth": ("noauth", "keystone"),
         "coordination": ("redis", "etcd"),
         "nova": ("none", "cloud"),
         # tls-quorum: the bus as deployment tools set it for every service: RabbitMQ over
         # TLS, quorum queues and oslo.messaging's queue manager, for Ironic and the agents.
         "bus": ("plain", "tls-quorum")}
# Named shapes: what each sets apart from the embedded profile.
PROFILES = {
    "embedded": {},
    "production": {"database": "mariadb", "auth": "keystone", "coordination": "etcd"},
}
PRODUCTION = PROFILES["production"]
# The production shape with a whole nova in front of it (Glance, Neutron, nova's
# services; nova-compute services started one by one: start_compute).
PROFILES["nova-cloud"] = dict(PRODUCTION, nova="cloud")
# Every service a stack can run, in start order, and whether a shape runs it.
SERVICES = (
    (rabbitmq, lambda shape: True),
    (redis, lambda shape: shape["coordination"] == "redis"),
    (etcd, lambda shape: shape["coordination"] == "etcd"),
    (mariadb, lambda shape: shape["database"] == "mariadb"),
    (keystone, lambda shape: shape["auth"] == "keystone"),
    (placement, lambda shape: True),
    (ironic, lambda shape: True),
    (glance, lambda shape: shape["nova"] == "cloud"),
    (neutron, lambda shape: shape["nova"] == "cloud"),
    (nova, lambda shape: shape["nova"] == "cloud"),
)
BY_NAME = {module.NAME: module for module, _ in SERVICES}

SCOPE_KEYS = {"project_name", "project_id", "project_domain_name", "project_domain_id",
              "domain_name", "domain_id", "system_scope"}


def shape_of(**knobs):
    """Every knob's value: those given (checked), the embedded profile's for the rest."""
    unknown = set(knobs) - set(KNOBS)
    if unknown:
        raise TypeError(f"no such knob: {', '.join(sorted(unknown))}")
    for knob, value in knobs.items():
        if value not in KNOBS[knob]:
            raise ValueError(f"{knob} must be one of {KNOBS[knob]}, not {value!r}")
    shape = {knob: knobs.get(knob, choices[0]) for knob, choices in KNOBS.items()}
    if shape["nova"] == "cloud" and (shape["auth"], shape["database"]) != ("keystone",
                                                                           "mariadb"):
        raise ValueError("nova=cloud runs behind Keystone on MariaDB (auth=keystone, "
                         "database=mariadb): the nova-cloud profile")
    return shape


def services_of(shape):
    """The service modules a stack of this shape runs, in start order."""
    return [module for module, runs in SERVICES if runs(shape)]


def install(**knobs):
    """Install what a stack of this shape needs and is not there yet (idempotent; one
    process at a time, so stacks started side by side, as pytest's workers start theirs,
    never run apt-get or build one virtualenv twice at once)."""
    modules = services_of(shape_of(**knobs))
    with process.install_lock():
        process.install_missing(
            profiles=[module.NAME for module in modules],
            venv_extras=[(releases.pins(*module.VENV_PACKAGES), module.venv_ready)
                         for module in modules if hasattr(module, "VENV_PACKAGES")])
        for module in modules:  # a service with a virtualenv of its own
            if hasattr(module, "install"):
                module.install()


def _http(name, doc=None):
    """A property: the http:// address of the stack's service ``name`` on loopback."""
    return property(lambda stack: f"http://127.0.0.1:{stack.ports[name]}", doc=doc)


class LocalStack:
    """The real services, each startable and stoppable on its own.

    ``database`` ("sqlite" or "mariadb"), ``auth`` ("noauth" or "keystone") and
    ``coordination`` ("redis" or "etcd") compose (KNOBS); the defaults are the
    embedded profile, ``LocalStack.production()`` is MariaDB + Keystone + etcd.
    """

    def __init__(self, workdir=None, ironic_max_limit=None, **knobs):
        self.shape = shape_of(**knobs)
        # Ironic's [api] max_limit: the longest page it answers (None: its 1000)
        self.ironic_max_limit = ironic_max_limit
        self.release = releases.current()  # the OpenStack release its services are of
        # stack.database, stack.auth, stack.coordination: what the service modules read.
        for knob, value in self.shape.items():
            setattr(self, knob, value)
        self.workdir = workdir or tempfile.mkdtemp(prefix="rp-stack-")
        self.listing_key = secrets.token_hex(16)  # [reconcile] shared_listing_keys
        os.makedirs(self.workdir, exist_ok=True)
        modules = services_of(self.shape)
        self.names = tuple(module.NAME for module in modules)
        self.ports = {name: process.free_port() for name in self.names}
        for module in modules:
            self.ports.update({name: process.free_port()
                               for name in getattr(module, "EXTRA_PORTS", ())})
        self.services = {name: process.Service(name, self.workdir) for name in self.names}
        self._admin_auth = {}

    @classmethod
    def production(cls, workdir=None, **overrides):
        """The shape operators run: MariaDB, Keystone, etcd (any knob can be overridden)."""
        return cls(workdir, **dict(PRODUCTION, **overrides))

    # -- addresses -------------------------------------------------------
    placement_url = _http("placement")
    ironic_url = _http("ironic")
    keystone_url = _http("keystone", "Keystone's root (the catalog's identity endpoint is "
                                     "this + /v3).")
    etcd_url = _http("etcd", "etcd's client URL (plain http).")

    @property
    def transport_url(self):
        port = self.ports["rabbitmq_tls" if self.bus == "tls-quorum" else "rabbitmq"]
        return f"rabbit://guest:guest@127.0.0.1:{port}/"

    @property
    def rabbit_options(self):
        """[oslo_messaging_rabbit] of every client of the bus (empty: the defaults)."""
        if self.bus != "tls-quorum":
            return {}
        return {"ssl": "true", "ssl_ca_file": rabbitmq.ca_file(self),
                "rabbit_quorum_queue": "true", "use_queue_manager": "true"}

    @property
    def redis_url(self):
        return f"redis://127.0.0.1:{self.ports['redis']}"

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
                "socket": mariadb.socket_path(self),
                "databases": {svc: self.database_url(svc) for svc in mariadb.DATABASES}}

    def database_url(self, service):
        """The SQLAlchemy URL a service (keystone, placement, ironic) uses."""
        if self.database == "mariadb":
            return mariadb.url(self, service)
        return f"sqlite:///{self.workdir}/{service}/{service}.db"

    # -- identities (keystone profile) -----------------------------------
    def url(self, name):
        """The http:// address on loopback of the stack's service ``name``."""
        return f"http://127.0.0.1:{self.ports[name]}"

    def catalogued(self):
        """The service modules of this stack that Keystone's catalog lists."""
        return [BY_NAME[name] for name in self.names if hasattr(BY_NAME[name], "CATALOG")]

    def credentials(self, name):
        """keystoneauth options for an [ironic] or [placement] section, as identity ``name``
        (one of keystone.IDENTITIES) would use them; endpoints come from the catalog."""
        return keystone.credentials(self, name)

    def admin_auth(self, service_type):
        """What clients.Ironic / clients.Placement authenticate with: None on noauth (they send
        the noauth headers), else a refreshing Keystone token of the bootstrap admin,
        system-scoped for Ironic ("baremetal"), project-scoped for Placement ("placement")."""
        if self.auth != "keystone":
            return None
        if service_type not in self._admin_auth:
            scope = ({"system": {"all": True}} if service_type == "baremetal"
                     else {"project": {"name": "admin", "domain": {"name": "Default"}}})
            self._admin_auth[service_type] = keystone.admin_token(self, scope)
        return self._admin_auth[service_type]

    def reporter_conf(self, **sections):
        """Text of an rp_reporter config file pointing at this stack.  Sections passed in
        override per key; an [ironic]/[placement] override that names a scope (project or
        system) replaces the default's scope."""
        if self.auth == "keystone":
            ironic_section = self.credentials("rp-system-reader")
            placement_section = self.credentials("rp-service")
        else:
            ironic_section = {"auth_type": "none", "endpoint_override": self.ironic_url}
            placement_section = {"auth_type": "admin_token", "endpoint": self.placement_url,
                                 "token": "admin"}
        conf = {
            "DEFAULT": {"host": "rp-local"},
            "ironic": ironic_section,
            "placement": placement_section,
            "notifications": {"transport_url": self.transport_url},
            # Every agent of the stack signs and checks the shared listing with it.
            "reconcile": {"shared_listing_keys": self.listing_key},
        }
        if self.rabbit_options:  # the bus as every service has it: [DEFAULT] transport_url
            del conf["notifications"]
            conf["DEFAULT"]["transport_url"] = self.transport_url
            conf["oslo_messaging_rabbit"] = dict(self.rabbit_options)
            conf["oslo_concurrency"] = {"lock_path": os.path.join(self.workdir, "locks")}
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
        """Install what this shape needs, then start these services (default: all)."""
        install(**self.shape)
        for name in names or self.names:
            self.start_service(name)

    def start_service(self, name):
        """Start one service (one of self.names) without start()'s install check: to bring
        back one that was stopped."""
        BY_NAME[name].start(self)

    def stop(self, names=None):
        for name in reversed(names or self.names):
            stop = getattr(BY_NAME[name], "stop", None)
            if stop:
                stop(self)
            else:
                self.services[name].stop()

    def restart(self, name):
        self.stop([name])
        self.start_service(name)

    def service(self, name):
        """The child process ``name`` (one of a service module's several, such as
        nova-conductor or a nova-compute), made on first use."""
        if name not in self.services:
            self.services[name] = process.Service(name, self.workdir)
        return self.services[name]

    def start_compute(self, host, driver, shard, env=None, cell=nova.CELL,
                      bin_dir=nova.COMPUTE_BIN, **sections):
        """Start (or restart, reconfigured) nova-compute ``host`` (nova-cloud profile):
        ``driver`` "stock" or "rp_reporter", its own ``[ironic] shard``, ``env`` over
        this process's environment, in ``cell`` (``nova.add_cell``), from the
        environment of ``bin_dir`` (this Python's by default); returns its log."""
        return nova.start_compute(self, host, driver, shard, env=env, cell=cell,
                                  bin_dir=bin_dir, **sections)

    def wait_compute_mapped(self, *hosts, timeout=180, by_service=False):
        """Until each nova-compute of ``hosts`` has reported its nodes and is mapped to
        its cell (``by_service``: by its service record, for services of a ring that
        may give one of them no node)."""
        nova.wait_mapped(self, hosts, timeout, by_service)

    def service_dir(self, name):
        """The service's own directory in the work directory (made if missing)."""
        path = os.path.join(self.workdir, name)
        os.makedirs(path, exist_ok=True)
        return path
