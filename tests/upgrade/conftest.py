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

"""A whole nova of 2025.1 with servers running, upgraded the way operators do it, one
process at a time (tox -e upgrade):

* three nova-computes (nova 31) sharing one fleet through rp_reporter's ring, two agents
  beside them, all of rp_reporter's previous release (PREVIOUS, run from its commit);
* what every step must keep is the baseline the ``up`` fixture makes (its servers, the
  fleet's records and providers), checked after each step (``Upgrade.step``); a boot
  loop and a sampler of what is offered run throughout (traffic.py).

The figures go to bench-results/upgrade.json.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from tests.functional.agents import AgentProcess
from tests.functional.agents import stop_all
from tests.nova_ha import conftest as ha
from tests.upgrade import traffic
from tools import clients
from tools import localstack
from tools.localstack import glance
from tools.localstack import nova
from tools.localstack import process
from tools.localstack import releases
from tools.localstack import running
from tools.localstack import upgrade
from tools.wait import NotSeen
from tools.wait import wait_for

FROM, TO = "2025.1", "2026.1"
# rp_reporter before the upgrade issue's first change (its group record had no holds).
PREVIOUS = "726b8237fe1e090e486509f6fc86781406f397a5"
REPO = pathlib.Path(__file__).resolve().parents[2]
HOSTS = traffic.HOSTS
AGENTS = ("up-agent-1", "up-agent-2")
SHARD, GROUP = traffic.SHARD, "nova-upgrade"
# Over 3 services, each gets 2 baseline servers: with 12 nodes one service got a single
# node one run in about seven (the ring splits by the nodes' uuids); with 24, one in 400.
NODES = 24
LEASE, HEARTBEAT = 10, 1
# nova's report_interval and service_down_time as the HA suite has them: a restart for
# an upgrade outlasts both, so only the hold keeps the ring from moving its servers.
REPORT, SERVICE_DOWN, PERIODIC = 5, 20, 10
SETTLE = traffic.SETTLE  # s: the longest a step's servers and actions may take to settle
RESULTS = pathlib.Path(os.environ.get("RP_BENCH_RESULTS", "bench-results")) / "upgrade.json"
PART_RESULTS = RESULTS.with_name("upgrade-rp_reporter.json")
# s: the longest a free node may go unoffered to nova's scheduler in a step: Ironic's
# API restart (16 s here, control_plane_down_s) and the periodic after it (PERIODIC).
UNSCHEDULABLE_BOUND = 30
# the OpenStack project each service of the stack runs (by its name's first word)
DISTRIBUTIONS = {"nova": "nova", "placement": "openstack-placement", "ironic": "ironic",
                 "keystone": "keystone", "glance": "glance", "neutron": "neutron"}
FENCED = re.compile(r"compute service (\S+) forced down: it is fenced")
REHOMED = re.compile(r"re-homing instance ([0-9a-f-]{36})")


def previous_tree(workdir):
    """rp_reporter's package as of PREVIOUS, extracted from the repository's history
    (fetched from origin when a shallow clone lacks it); the directory to put first on
    PYTHONPATH (its dependencies are today's: unchanged)."""
    tree = pathlib.Path(workdir, "previous")
    tree.mkdir(exist_ok=True)

    def archive():
        return subprocess.run(["git", "-C", str(REPO), "archive", PREVIOUS, "rp_reporter"],
                              capture_output=True, check=False)
    found = archive()
    if found.returncode:
        subprocess.run(["git", "-C", str(REPO), "fetch", "-q", "--depth", "1", "origin",
                        PREVIOUS], capture_output=True, check=False, timeout=120)
        found = archive()
    if found.returncode:
        pytest.skip(f"rp_reporter's previous release {PREVIOUS[:12]} is not in this clone's "
                    f"history, nor fetched from origin: {found.stderr.decode()[:200]}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=found.stdout, check=True)
    assert not (tree / "rp_reporter" / "nova_compute" / "fencing.py").exists()
    return str(tree)


def previous_version(tree):
    """The version rp_reporter's previous release gives itself: the literal in its
    package (it was built before pbr), what its ``--version`` printed."""
    text = pathlib.Path(tree, "rp_reporter", "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"$', text, re.MULTILINE).group(1)


def install_nova_compute(venv, release):
    """A nova-compute host's environment as an operator upgrades it: a new virtualenv,
    the release's nova under its constraints, then the driver the README's way; its bin."""
    constraints = str(releases.constraints_file(release))
    python = os.path.join(venv, "bin", "python3")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([process.uv(), "pip", "install", "--quiet", "--python", python,
                    "--constraint", constraints,
                    f"nova=={releases.RELEASES[release].services['nova']}"],
                   check=True, timeout=900)
    wheels = pathlib.Path(venv, "dist")
    subprocess.run([python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
                    str(REPO), str(REPO / "shims")], check=True, timeout=600)
    # with the extra of the group's backend (doc/source/install/driver.md), and the shim
    subprocess.run([python, "-m", "pip", "install", "-q", "-c", constraints,
                    *(f"{wheel}[etcd3gw]" for wheel in wheels.glob("rp_reporter-*.whl")),
                    *map(str, wheels.glob("rp_reporter_nova-*.whl"))],
                   check=True, timeout=900)
    return os.path.join(venv, "bin")


@dataclasses.dataclass
class Upgrade:
    stack: localstack.LocalStack
    nova: clients.Nova
    placement: clients.Placement
    ironic: clients.Ironic
    resource_class: str
    flavor: str
    nodes: list
    previous: str                      # the previous release's tree (PYTHONPATH)
    imports: str                       # where each process records its rp_reporter's file
    agents: dict = dataclasses.field(default_factory=dict)
    # what each process was started to run: this tree (names of agents and hosts), the
    # release of each nova-compute, the control plane's
    new_code: set = dataclasses.field(default_factory=set)
    compute_release: dict = dataclasses.field(default_factory=dict)
    control_release: str = FROM
    homes: dict = dataclasses.field(default_factory=dict)     # server -> [host, ...]
    deleted: set = dataclasses.field(default_factory=set)     # servers users deleted
    steps: list = dataclasses.field(default_factory=list)
    results: dict = dataclasses.field(default_factory=dict)
    current: str = "start"
    sampler: traffic.Sampler = None
    loop: traffic.BootLoop = None

    @property
    def ha(self):
        """The HA suite's reads of the cloud (compute node records, Placement's deletes,
        allocations), over the same clients."""
        return ha.Cloud(self.stack, self.nova, self.placement, self.results)

    def sections(self, host):
        conf = pathlib.Path(self.stack.workdir, f"rp_reporter-{host}.conf")
        conf.write_text(self.stack.reporter_conf(
            DEFAULT={"host": host},
            coordination={"backend_url": self.stack.coordination_url, "group": GROUP,
                          "lease": str(LEASE), "heartbeat": str(HEARTBEAT)}))
        return {"DEFAULT": {"update_resources_interval": str(PERIODIC),
                            "service_down_time": str(SERVICE_DOWN),
                            "report_interval": str(REPORT), "periodic_fuzzy_delay": "0"},
                "rp_reporter": {"peers_from": "coordination", "config_file": str(conf),
                                "full_pass_every": "10"},
                **upgrade.nova_sections(self.stack), **upgrade.IRONIC_RETRIES}

    def _env(self, name, previous):
        """The environment a process of rp_reporter's previous release (or this one)
        starts with, recording which tree it imports (``running``)."""
        (self.new_code.discard if previous else self.new_code.add)(name)
        return running.imports_env(self.imports,
                                   {"PYTHONPATH": self.previous} if previous else None)

    def start_compute(self, host, previous=False, bin_dir=nova.COMPUTE_BIN, release=FROM):
        """(Re)start ``host``: rp_reporter's previous release or this one, nova
        ``release`` from ``bin_dir``; waits until nova has its report since the start."""
        since = ha.utc_now()
        self.compute_release[host] = release
        self.stack.start_compute(host, "rp_reporter", SHARD, bin_dir=bin_dir,
                                 env=self._env(host, previous), **self.sections(host))
        wait_for(lambda: self.nova.compute_up(host, since), 180, f"{host} up since its start")

    def start_agent(self, name, previous=False):
        agent = AgentProcess(self.stack, SHARD, pathlib.Path(self.stack.workdir), name,
                             coordination={"group": "rp-upgrade"}, reconcile={"interval": 60})
        self.agents[name] = agent.start(env=self._env(name, previous))

    def running(self):
        """What each process runs, read from the process (tools/localstack/running.py):
        the release of each control plane service and nova-compute of the upgrade, and
        which of rp_reporter's trees each agent and nova-compute imported."""
        found = {}
        for name, service in self.stack.services.items():
            host, distribution = name.removeprefix("nova-compute-"), DISTRIBUTIONS.get(
                name.split("-")[0])
            if distribution and service.proc and (host == name or host in HOSTS):
                found[name] = service.running() and running.release(service.proc.pid,
                                                                    distribution)
        pids = {host: self.stack.service(f"nova-compute-{host}").proc.pid for host in HOSTS}
        pids.update({name: agent.proc.pid for name, agent in self.agents.items()})
        return {"releases": found,
                "rp_reporter": {name: self._tree(pid) for name, pid in pids.items()}}

    def _tree(self, pid):
        origin = running.imported_from(self.imports, pid)
        if origin is None or origin.startswith(self.previous + os.sep):
            return origin and "previous"
        return "new" if pathlib.Path(origin).with_name("nova_compute").joinpath(
            "fencing.py").exists() else origin

    def meant(self, found):
        """What ``found`` (``running()``) should read: what each process was started
        to run."""
        return {"releases": {name: self.compute_release.get(
                    name.removeprefix("nova-compute-"), self.control_release)
                    for name in found["releases"]},
                "rp_reporter": {name: "new" if name in self.new_code else "previous"
                                for name in found["rp_reporter"]}}

    def stop_when_idle(self, host):
        """The operator's stop: once none of the host's servers has a task in progress
        (nova-compute does not wait for them at SIGTERM; at its start-up a build it had
        begun goes to ERROR, and a hard reboot that had begun is not done again: nova
        clears the task of a server it finds powered on)."""
        def idle():
            found = self.nova._call("GET", f"/servers/detail?all_tenants=1&host={host}")
            return not any(s["OS-EXT-STS:task_state"] for s in found["servers"])
        wait_for(idle, SETTLE, f"{host}'s servers without a task in progress", interval=1)
        self.stack.service(f"nova-compute-{host}").stop()

    def disable(self, host, disabled=True):
        """``openstack compute service set --disable`` (or ``--enable``): no new server is
        sent to it; its nodes are left out of the sampler meanwhile (not offered, by the
        operator's will)."""
        self.nova.set_service_status(host, not disabled)
        self.sampler.resting = {n for n, h in self.ha.records(self.nodes).items()
                                if h == host} if disabled else set()

    def allocations_not_on_node(self, servers):
        """Servers of ``servers`` (``servers()``) whose allocation in Placement is not one
        unit of the fleet's class on their own node's provider (nova's node uuid is its
        provider's)."""
        return sum(self.placement.allocations(server) != {node: {self.resource_class: 1}}
                   for server, (_, _, _, node) in servers.items())

    def servers(self):
        """{server: (status, task_state, host, node)} of the servers the baseline holds."""
        found = {}
        for server in self.homes:
            got = self.nova.server(server)
            if got:
                found[server] = (got["status"], got["OS-EXT-STS:task_state"],
                                 got["OS-EXT-SRV-ATTR:host"],
                                 got["OS-EXT-SRV-ATTR:hypervisor_hostname"])
        return found

    def on(self, host):
        """The baseline's live servers on ``host`` now."""
        return sorted(s for s, (_, _, h, _) in self.servers().items() if h == host)

    def _log(self, host):
        return pathlib.Path(self.stack.workdir, f"nova-compute-{host}.log")

    def log_ends(self):
        """{host: the size of its nova-compute's log}."""
        return {host: self._log(host).stat().st_size for host in HOSTS}

    def logs_since(self, ends):
        """What each nova-compute logged since ``log_ends()`` gave ``ends``, host by host."""
        text = ""
        for host, end in ends.items():
            with open(self._log(host), "rb") as f:
                f.seek(end)
                text += f.read().decode(errors="replace")
        return text

    @contextlib.contextmanager
    def step(self, name):
        """One step: what it must keep, checked once its servers settle; yields a list
        the step appends its user actions to ((kind, server, the request's id), kind
        "reboot"/"delete": nova's answer to the step's own request)."""
        self.current, asked = name, []
        began, logs_before = time.time(), self.log_ends()
        deletes_before = self.ha.deleted_providers(self.nodes)
        deleted_before = self.ha.deleted_records(self.nodes)
        loop = self.loop
        failed_before, refused_before = (len(loop.failed), len(loop.refused)) if loop else (0, 0)
        self.sampler.reset()
        yield asked
        self.deleted |= {server for kind, server, _ in asked if kind == "delete"}
        lost_actions = self.settle(asked)
        servers = self.servers()
        for server, (_, _, host, _) in servers.items():
            if host != self.homes[server][-1]:
                self.homes[server].append(host)
        live = set(self.ha.records(self.nodes))
        logs = self.logs_since(logs_before)
        entry = {
            "step": name, "seconds": round(time.time() - began, 1),
            "servers_lost": sum(s not in servers or servers[s][0] != "ACTIVE"
                                for s in self.homes if s not in self.deleted),
            "moved": sum(len(h) > 1 for h in self.homes.values()),
            "moved_twice": sum(len(h) > 2 for h in self.homes.values()),
            "stuck_task_states": sum(bool(task) for _, task, _, _ in servers.values()),
            "records_deleted": (self.ha.deleted_records(self.nodes) - deleted_before
                                + len(set(self.nodes) - live)),
            "providers_deleted": self.ha.deleted_providers(self.nodes) - deletes_before + sum(
                self.placement.provider(n) is None for n in self.nodes),
            "allocations_not_on_node": self.allocations_not_on_node(servers),
            "user_actions": len(asked), "user_actions_lost": lost_actions, "asked": asked,
            "boots_failed": loop.failed[failed_before:] if loop else [],
            "boots_refused": loop.refused[refused_before:] if loop else [],
            "longest_unschedulable_s": round(self.sampler.longest, 1),
            "longest_unschedulable_node": self.sampler.worst,
            "fenced": sorted(self.sampler.forced | set(FENCED.findall(logs))),
            "servers_rehomed": sorted(set(REHOMED.findall(logs)) & set(self.homes)),
            "running": self.running(),
        }
        self.steps.append(entry)
        process.log(f"upgrade step: {json.dumps(entry)}")

    def carried_out(self, kind, server, request):
        """The user's action of ``request`` (the id nova answered it with) done: its
        instance action is the one asked, and (a reboot) nova's compute event for it
        succeeded; (a delete) the server and its allocations are gone."""
        action = self.nova.action(server, request)
        if action is None or action[0] != kind:
            return False
        if kind == "delete":
            return self.nova.server(server) is None and not self.placement.allocations(server)
        return action[1].get("compute_reboot_instance") == "Success"

    def settle(self, asked):
        """Wait until every live server of the baseline rests (ACTIVE, no task) and each
        asked action is carried out; the actions that were not."""
        def rested():
            return all(status == "ACTIVE" and not task
                       for status, task, _, _ in self.servers().values()) and all(
                self.carried_out(*action) for action in asked)
        with contextlib.suppress(NotSeen):
            wait_for(rested, SETTLE, "the step's servers at rest, its actions done",
                     interval=2)
        return sum(not self.carried_out(*action) for action in asked)


@pytest.fixture(scope="session")
def up(tmp_path_factory, nova_cloud_stack):
    """The session's 2025.1 cloud (tests/conftest.py) with a fleet of its own and
    rp_reporter's previous release on it, its baseline servers booted two on each
    compute, the sampler running; the fleet's processes stopped and the results written
    at the end.  In CI's nova-cloud-2025.1, the part marked every_release runs on the
    cloud the other suites share."""
    stack = nova_cloud_stack
    made = None
    try:
        nova_client = clients.Nova(stack, image_name=glance.IMAGE_NAME)
        ironic = clients.Ironic(stack.ironic_url, SHARD, auth=stack.admin_auth("baremetal"))
        resource_class = "CUSTOM_BAREMETAL_UPGRADE"
        made = Upgrade(stack, nova_client, clients.Placement(
            stack.placement_url, auth=stack.admin_auth("placement"),
            nova_traits=stack.release.nova_traits), ironic, resource_class,
            nova_client.flavor("bm-upgrade", resource_class),
            ironic.create_many(NODES, resource_class="baremetal-upgrade"),
            previous_tree(tmp_path_factory.mktemp("upgrade")),
            str(tmp_path_factory.mktemp("imports")))
        for name in AGENTS:
            made.start_agent(name, previous=True)
        with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:  # each mostly waits
            for started in [pool.submit(made.start_compute, host, True) for host in HOSTS]:
                started.result()
        nova.manage(stack, "cell_v2", "discover_hosts", "--by-service")
        wait_for(lambda: made.placement.offered(resource_class) == set(made.nodes), 240,
                 "every node offered")
        for host in HOSTS:
            for i in (1, 2):
                made.homes[made.nova.boot(f"{host}-{i}", made.flavor, host=host)] = [host]
        for server in made.homes:
            assert made.nova.wait_built(server, SETTLE)["status"] == "ACTIVE", server
        made.sampler = traffic.Sampler(made)
        yield made
    finally:
        if made is not None:
            for helper in (made.loop, made.sampler):
                if helper is not None:
                    helper.stop()
            stop_all(list(made.agents.values()))
            process.stop_all([stack.service(f"nova-compute-{host}") for host in HOSTS])
            made.results["steps"] = made.steps
            # the whole upgrade's figures, or those of its part CI runs
            results = RESULTS if "control_plane_down_s" in made.results else PART_RESULTS
            results.parent.mkdir(parents=True, exist_ok=True)
            results.write_text(json.dumps(made.results, indent=2, sort_keys=True) + "\n")
            print(f"\n{results}:\n{results.read_text()}")
