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

"""Three nova-compute services sharing one fleet, on the session's whole nova cloud
(tests/conftest.py, shared with tests/nova_cloud), killed and brought back by the tests:

* ``ours``: rp_reporter's driver with ``peers_from = coordination``; each service a
  member of one coordination group (etcd, each through its own proxy so one can be
  cut off), all three on one Ironic shard, split by rp_reporter's ring;
* ``stock``: nova's own driver, no shard: nova's ring over its live services.

The stock fleet runs first and is stopped before ours starts: without a shard it
would claim every node.  For the same reason these tests run before tests/nova_cloud's
in a session that runs both (tests/conftest.py orders them): its topologies start with
its first test.  The figures go to bench-results/nova-ha.json.
"""

import contextlib
import dataclasses
import datetime
import json
import os
import pathlib
import re
import signal
import time
import urllib.parse

import pytest

from tests.functional.proxy import Proxy
from tests.functional.proxy import TcpProxy
from tools import clients
from tools import localstack
from tools.localstack import glance
from tools.localstack import mariadb
from tools.localstack import nova
from tools.localstack import process
from tools.localstack import releases
from tools.wait import wait_for
from tools.wait import wait_until

LEASE = 10        # [coordination] lease of each service's membership (s)
HEARTBEAT = 1     # its renewal interval (s)
PERIODIC = 10     # nova's [DEFAULT] update_resources_interval (s)
SERVICE_DOWN = 20  # nova's [DEFAULT] service_down_time on the computes (s)
REPORT = 5        # nova's [DEFAULT] report_interval (s)
# What nova's calls to nova-conductor add to a takeover and to a move, on a release
# whose every call waits for its reply in 0.5 s steps (oslo.messaging before 18:
# releases.rpc_reply_step_s): a survivor's periodic taking the free nodes over, or a
# re-homing round with its move (the services, the group record, the instances, the
# claim, the move, its action and events, the compute node record), about 20 calls.
RPC_SLACK = 20 * releases.current().rpc_reply_step_s  # s: 10 on nova 31 to 33, 0 on 34
# nova's [DEFAULT] periodic_fuzzy_delay: nova delays a service's first periodic run by a
# random 0..60 s (the default) after its start, and a survivor started that recently
# would claim nothing until then: the bounds are about a running service.
FUZZY_DELAY = 0
# [rp_reporter] full_pass_every of ours: nova's periodic goes over the nodes that need it
# in between (a build's group policy check asks the driver for its nodes then too).
FULL_PASS_EVERY = 10
ORPHAN_GRACE = 20  # [rp_reporter] orphaned_nodes_grace of ours (s)
NODES = 9
RESULTS = pathlib.Path(os.environ.get("RP_BENCH_RESULTS", "bench-results")) / (
    f"nova-ha{releases.venv_suffix()}.json")  # an older release's: nova-ha-<release>.json
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f-]{27}")
REHOMING = re.compile(r"^(\S+ \S+) \d+ WARNING rp_reporter\.nova_compute\S* .*re-homing "
                      r"instance ([0-9a-f-]{36})", re.M)
RING = re.compile(r"^(\S+ \S+) \d+ INFO rp_reporter\.nova_compute\S* .*rp_reporter ring "
                  r"members now", re.M)
CLAIMS = re.compile(r"^(\S+ \S+) \d+ INFO rp_reporter\.nova_compute\S* .*nodes managed here: "
                    r"\d+; claimed \[(.*?)\]; released \[(.*?)\]", re.M)


@dataclasses.dataclass
class Fleet:
    """One fleet of three compute services and their nodes."""
    name: str
    driver: str
    hosts: list
    shard: str
    resource_class: str
    flavor: str
    ironic: clients.Ironic
    nodes: list
    sections: dict            # host -> nova.conf sections
    # host -> the relay in front of its coordination backend (etcd's HTTP, Redis's TCP)
    proxies: dict = dataclasses.field(default_factory=dict)
    bus_proxies: dict = dataclasses.field(default_factory=dict)  # host -> its bus relay
    logs: dict = dataclasses.field(default_factory=dict)     # host -> its log file
    deaths: dict = dataclasses.field(default_factory=dict)   # host -> [when it stopped]
    marks: dict = dataclasses.field(default_factory=dict)    # host -> log size at start
    envs: dict = dataclasses.field(default_factory=dict)     # host -> its test hooks' env

    def cut_backend(self, host):
        """``host`` cut off from its coordination backend (a partition)."""
        proxy = self.proxies[host]
        if isinstance(proxy, TcpProxy):
            proxy.cut = True
        else:
            proxy.answer = lambda method, path: (503, b"partitioned")

    def heal_backend(self, host):
        proxy = self.proxies[host]
        if isinstance(proxy, TcpProxy):
            proxy.heal()
        else:
            proxy.answer = None

    def start(self, stack, host):
        """(Re)start ``host`` with its sections; what it logs from here is ``since``.
        A running one is stopped first: whatever it managed, it manages no more."""
        self.deaths.setdefault(host, []).append(time.time())
        path = pathlib.Path(stack.workdir, f"nova-compute-{host}.log")
        self.marks[host] = path.stat().st_size if path.exists() else 0
        self.logs[host] = stack.start_compute(host, self.driver, self.shard,
                                              env=self.envs.get(host), **self.sections[host])

    def since(self, host):
        """What ``host`` logged since it was last (re)started."""
        with open(self.logs[host], "rb") as log:
            log.seek(self.marks[host])
            return log.read().decode(errors="replace")

    def kill(self, stack, host):
        """SIGKILL: no goodbye, no leaving the group; the time it died."""
        service = stack.service(f"nova-compute-{host}")
        service.signal(signal.SIGKILL)
        service.proc.wait(15)
        self.deaths.setdefault(host, []).append(time.time())
        return self.deaths[host][-1]


@dataclasses.dataclass
class Cloud:
    stack: localstack.LocalStack
    nova: clients.Nova
    placement: clients.Placement
    results: dict

    def homes(self, nodes):
        """{node: [host of each compute node record]} for these nodes (a record of a host
        not yet mapped to the cell is not listed by nova's API: none, for a moment, when
        the ring gives a service its first node)."""
        found = self.nova.compute_nodes()
        return {n: found.get(n, []) for n in nodes}

    def home(self, node):
        """The host of the node's one compute node record, else None."""
        hosts = self.homes([node])[node]
        return hosts[0] if len(hosts) == 1 else None

    def offered(self, fleet_):
        return self.placement.offered(fleet_.resource_class) & set(fleet_.nodes)

    def records(self, nodes):
        """{node: host} of the nodes' compute node records in nova's cell database (nova's
        API lists only those of hosts mapped to the cell)."""
        out = mariadb.client(self.stack, "SELECT hypervisor_hostname, host FROM compute_nodes "
                                         "WHERE deleted = 0;", "nova")
        found = dict(line.split("\t") for line in out.splitlines() if line)
        return {node: found[node] for node in nodes if node in found}

    def deleted_records(self, nodes):
        """Compute node records of these nodes nova has deleted (soft-deleted rows)."""
        out = mariadb.client(self.stack, "SELECT hypervisor_hostname FROM compute_nodes "
                                         "WHERE deleted != 0;", "nova")
        nodes = set(nodes)
        return sum(node in nodes for node in out.split())

    def deleted_providers(self, nodes):
        """DELETE requests Placement answered for these nodes' providers (its log)."""
        text = pathlib.Path(self.stack.workdir, "placement.log").read_text()
        return sum(len(re.findall(rf"DELETE /resource_providers/{n}\S* status: 20", text))
                   for n in nodes)

    def allocations_lost(self, servers):
        """Servers nova still has whose allocation in Placement is gone."""
        return sum(not self.placement.allocations(s) for s in servers
                   if self.nova.server(s) is not None)


def nova_sections(extra=None):
    sections = {"DEFAULT": {"update_resources_interval": str(PERIODIC),
                            "service_down_time": str(SERVICE_DOWN),
                            "report_interval": str(REPORT),
                            "periodic_fuzzy_delay": str(FUZZY_DELAY)}}
    for section, values in (extra or {}).items():
        sections.setdefault(section, {}).update(values)
    return sections


def make_fleet(stack, nova_client, workdir, name, driver, shard, bus_relay=False):
    """Three compute services of ``driver``; ``bus_relay``: each reaches its cell's bus
    through a relay of its own (``bus_proxies``), for the stories that cut one off."""
    hosts = [f"{name}-{i}" for i in (1, 2, 3)]
    ironic = clients.Ironic(stack.ironic_url, shard or None, auth=stack.admin_auth("baremetal"))
    resource_class = f"baremetal-ha-{name}"
    placement_class = "CUSTOM_" + resource_class.upper().replace("-", "_")
    made = Fleet(name, driver, hosts, shard, placement_class,
                 nova_client.flavor(f"bm-{resource_class}", placement_class), ironic,
                 ironic.create_many(NODES, resource_class=resource_class), {})
    for host in hosts:
        extra = {}
        if driver == "rp_reporter":
            conf = pathlib.Path(workdir, f"rp_reporter-{host}.conf")
            conf.write_text(stack.reporter_conf(
                DEFAULT={"host": host},
                coordination={"backend_url": backend_through_proxy(stack, made, host),
                              "group": f"nova-{name}", "lease": str(LEASE),
                              "heartbeat": str(HEARTBEAT)}))
            extra = {"rp_reporter": {"peers_from": "coordination", "config_file": str(conf),
                                     "full_pass_every": str(FULL_PASS_EVERY),
                                     # deployed nodes nothing owns: looked for and
                                     # undeployed at the suite's pace
                                     "orphaned_nodes_interval": str(PERIODIC),
                                     "orphaned_nodes_grace": str(ORPHAN_GRACE),
                                     "undeploy_orphaned_nodes": "True"}}
            if bus_relay:
                bus = urllib.parse.urlsplit(nova.cell_transport_url(stack))
                made.bus_proxies[host] = TcpProxy(bus.hostname, bus.port)
                relayed = bus.netloc.replace(f":{bus.port}", f":{made.bus_proxies[host].port}")
                extra["DEFAULT"] = {"transport_url": bus._replace(netloc=relayed).geturl()}
                # its notifications' bus (the API's, same broker) through the same relay
                top = urllib.parse.urlsplit(stack.transport_url)
                extra["oslo_messaging_notifications"] = {
                    "transport_url": top._replace(netloc=relayed).geturl()}
        made.sections[host] = nova_sections(extra)
    return made


def backend_through_proxy(stack, made, host):
    """``host``'s [coordination] backend_url: the stack's backend behind a relay of its
    own (``made.proxies``), so a test can cut that service alone off from it."""
    if stack.coordination == "etcd":
        made.proxies[host] = Proxy(stack.coordination_url.replace("etcd3+", ""))
        return "etcd3+" + made.proxies[host].url
    backend = urllib.parse.urlsplit(stack.coordination_url)
    made.proxies[host] = TcpProxy(backend.hostname, backend.port)
    return f"redis://127.0.0.1:{made.proxies[host].port}"


@contextlib.contextmanager
def running(cloud, made):
    """Every service the fleet started (a replacement host's too) is stopped when this
    ends, a failure included: a service left running goes on claiming nodes (stock's,
    unsharded, every node of the suites after it)."""
    try:
        yield made
    finally:
        process.stop_all([cloud.stack.service(f"nova-compute-{host}") for host in made.logs])


def start_fleet(cloud, made):
    """Every service of the fleet started at once; returns once every service is up and
    mapped, every node has one record and is offered, and the records' hosts held
    through a tracker period."""
    for host in made.hosts:
        made.start(cloud.stack, host)
    for host in made.hosts:
        wait_for(lambda h=host: cloud.nova.compute_up(h), 120, f"{host} up")
    # Map every service to its cell now, by service.  Discovery by compute node maps a
    # host only through a record not marked mapped, and marks only the record it mapped
    # a host by; a record keeps the mark when it moves, so a service holding only such
    # records stays unmapped: its nodes not listed by nova's API, a boot sent to it
    # refused (test_a_service_holding_only_a_record_it_took_over_...).  ``--by-service``
    # is nova's own answer for Ironic; the operator guide says to run it.
    nova.manage(cloud.stack, "cell_v2", "discover_hosts", "--by-service")

    def homes_and_offered():
        return cloud.homes(made.nodes), cloud.offered(made)

    def every_node_one_home_and_offered(seen):
        homes, offered = seen
        return all(len(h) == 1 for h in homes.values()) and offered == set(made.nodes)
    wait_until(homes_and_offered, every_node_one_home_and_offered, 180,
               f"{made.name}: every node has one compute node record and is offered")
    # The first service up claims every node; the others take their share only at their
    # trackers' next runs (nova's ring is rebuilt there).  Wait for the homes to hold
    # through a whole tracker period with every service in the ring, or the tests would
    # pick a victim by a ring that is still moving (seen: its free nodes gone by the kill).
    settled = {"homes": None, "since": time.time()}

    def homes_held():
        time.sleep(1)  # one look a second at nova's API is enough
        now = {n: tuple(h) for n, h in cloud.homes(made.nodes).items()}
        if now != settled["homes"] or any(len(h) != 1 for h in now.values()):
            settled.update(homes=now, since=time.time())
        return time.time() - settled["since"] >= PERIODIC + 5
    wait_for(homes_held, 6 * PERIODIC + 60, f"{made.name}: the ring settled")


def restart(cloud, made, host, timeout=120):
    """(Re)start ``host`` and wait until nova has its report since: nova's start-up
    has run.  Up by its report from before it died is not enough: nova's start-up
    puts in ERROR a build sent to it meanwhile (its allocation on a node of this
    service, the build not claimed yet)."""
    since = utc_now()
    made.start(cloud.stack, host)
    wait_for(lambda: cloud.nova.compute_up(host, since), timeout,
             f"{host} up again, reporting since its restart")


def utc_now():
    """Now as nova's API gives times: naive UTC."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def log_time(at):
    """A nova log line's timestamp (local time, to the millisecond) as time.time()."""
    return datetime.datetime.strptime(at, "%Y-%m-%d %H:%M:%S.%f").timestamp()


def claims(made, host):
    """[(time, claimed nodes, released nodes)] from one service's log."""
    text = pathlib.Path(made.logs[host]).read_text()
    return [(log_time(at), set(UUID.findall(claimed)), set(UUID.findall(released)))
            for at, claimed, released in CLAIMS.findall(text)]


def claimed_since(made, host, since):
    """Nodes ``host`` claimed at or after ``since``."""
    return {node for at, claimed, _ in claims(made, host) if at >= since for node in claimed}


def member_logged(made, host):
    """``host`` joined its coordination group since its last start."""
    return f"member {host} of coordination group" in made.since(host)


def ring_logged(made, host, since):
    """``host`` logged a new set of ring members at or after ``since``."""
    return any(log_time(at) >= since for at in RING.findall(made.since(host)))


def rehoming_logged(made, host, server):
    return f"re-homing instance {server}" in made.since(host)


def first_rehoming(made, hosts, servers):
    """When the first of these servers' re-homing was logged by any of ``hosts``."""
    found = [log_time(at) for host in hosts
             for at, server in REHOMING.findall(made.since(host)) if server in servers]
    return min(found, default=None)


def report_time(service):
    """When nova last heard from a compute service (its os-services updated_at)."""
    return datetime.datetime.fromisoformat(service["updated_at"]).replace(
        tzinfo=datetime.timezone.utc).timestamp()


def managed_now(made, host):
    """The nodes ``host`` manages now, by its own log of what it claimed and released
    (a kill, or a restart, starts it from none)."""
    events = [(at, claimed, released) for at, claimed, released in claims(made, host)]
    events += [(at, set(), None) for at in made.deaths.get(host, [])]
    held = set()
    for _, claimed, released in sorted(events, key=lambda e: e[0]):
        held = set() if released is None else held - released
        held |= claimed
    return held


def managed_spans(made, until):
    """{node: [(host, start, end)]}: when each service managed each node, from its own
    log of the nodes it claimed and released; a kill ends all it held."""
    spans = {}
    for host in made.hosts:
        events = [(at, claimed, released) for at, claimed, released in claims(made, host)]
        events += [(at, set(), None) for at in made.deaths.get(host, [])]
        held = {}
        for at, claimed, released in sorted(events, key=lambda e: e[0]):
            for node in set(held) if released is None else released & set(held):
                spans.setdefault(node, []).append((host, held.pop(node), at))
            for node in claimed:
                held.setdefault(node, at)
        for node, start in held.items():
            spans.setdefault(node, []).append((host, start, until))
    return spans


def double_claimed_max_s(spans):
    """The longest time one node was managed by two services at once."""
    longest = 0.0
    for held in spans.values():
        for i, (host, start, end) in enumerate(held):
            for other, other_start, other_end in held[i + 1:]:
                if other != host:
                    longest = max(longest, min(end, other_end) - max(start, other_start))
    return round(longest, 3)


def pytest_addoption(parser):
    parser.addoption(
        "--ha-stories", default="", help="Only these of ours' stories, comma-separated "
        "(test_ha.STORIES), on a fleet just started: a story's own run while it is being "
        "built (select its tests with -k; point RP_BENCH_RESULTS elsewhere)")


@pytest.fixture(scope="session")
def cloud(nova_cloud_stack):
    stack = nova_cloud_stack
    cloud = Cloud(stack, clients.Nova(stack, image_name=glance.IMAGE_NAME),
                  clients.Placement(stack.placement_url, auth=stack.admin_auth("placement"),
                                    nova_traits=stack.release.nova_traits),
                  {"lease_s": LEASE, "periodic_s": PERIODIC,
                   "service_down_time_s": SERVICE_DOWN,
                   "periodic_fuzzy_delay_s": FUZZY_DELAY})
    yield cloud
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(cloud.results, indent=2, sort_keys=True) + "\n")
    print(f"\n{RESULTS}:\n{RESULTS.read_text()}")
