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

"""rp_reporter.nova_compute.IronicDriver beside nova's own IronicDriver, with nova's real
classes (ring code, ProviderTree), against the real Ironic through nova's own (openstacksdk)
connection where a test says so.

Several compute services are simulated in one process, as nova's own tests do: nova's
CONF.host (and [ironic] shard, conductor_group, peer_list) are switched per service, each
service has its own instance list (what nova's database would say), and the live service
list is what nova's ServiceList would return.
"""

import contextlib
import datetime
import email.utils
import json
import tempfile
import threading
import time
import types
import uuid

import nova.conf
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from nova import context as nova_context
from nova import exception
from nova import objects
from nova.compute import provider_tree as nova_provider_tree
from nova.virt.ironic import driver as nova_driver
from nova.virt.ironic import ironic_states
from openstack import exceptions as sdk_exc
from openstack.baremetal.v1 import node as sdk_node

from rp_reporter import conf as rp_conf
from rp_reporter import group_record
from rp_reporter import membership
from rp_reporter import model
from rp_reporter import nova_compute
from rp_reporter import rehoming
from rp_reporter.nova_compute import deleted_nodes
from rp_reporter.nova_compute import guard
from rp_reporter.nova_compute import node_listing
from rp_reporter.nova_compute import periodic
from rp_reporter.nova_compute import queued_builds
from rp_reporter.nova_compute import recovery
from rp_reporter.nova_compute import rehome
from rp_reporter.sync import plan as planner
from tools import clients
from tools import localstack
from tools.bench import nova_scale

CONF = nova.conf.CONF
HOSTS = ("compute-a", "compute-b", "compute-c")
CLASSES = {"nova": nova_driver.IronicDriver, "ours": nova_compute.IronicDriver}


@pytest.fixture(scope="module")
def nova_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("nova") / "nova.conf"
    rp_path = path.parent / "rp_reporter.conf"
    rp_path.write_text(f"[ring]\npeer_list = {','.join(HOSTS)}\n")
    path.write_text(f"[DEFAULT]\nhost = compute-a\n[rp_reporter]\nconfig_file = {rp_path}\n")
    CONF(["--config-file", str(path)], project="nova")
    objects.register_all()
    yield
    CONF.reset()


class AlwaysUp:
    def service_is_up(self, service):
        return True


class Fleet:
    """Compute services simulated in one process: instance lists and the live services."""

    def __init__(self, monkeypatch, hosts):
        self.instances = {h: set() for h in hosts}
        self.live = list(hosts)
        monkeypatch.setattr(objects.InstanceList, "get_uuids_by_host",
                            lambda ctxt, host: sorted(self.instances.get(host, ())))
        monkeypatch.setattr(objects.ServiceList, "get_all_computes_by_hv_type",
                            lambda ctxt, hv: [objects.Service(host=h) for h in self.live])

    @staticmethod
    def driver(kind, connection=None):
        driver = CLASSES[kind](virtapi=None)
        driver.servicegroup_api = AlwaysUp()
        if connection is not None:
            driver._ironic_connection = connection
        return driver

    @staticmethod
    def owned(driver, host, ironic=None, rp_reporter=None):
        """get_available_nodes() of ``driver`` as compute service ``host`` configured so."""
        overrides = [("host", None, host)]
        overrides += [(k, "ironic", v) for k, v in (ironic or {}).items()]
        overrides += [(k, "rp_reporter", v) for k, v in (rp_reporter or {}).items()]
        for name, group, value in overrides:
            CONF.set_override(name, value, group=group)
        try:
            return set(driver.get_available_nodes())
        finally:
            for name, group, _ in overrides:
                CONF.clear_override(name, group=group)


class FakeConnection:
    """nova's openstacksdk baremetal proxy, for a listing only: openstacksdk's (what
    nova's driver asks) and Ironic's sorted pages (what rp_reporter's driver asks with
    full_pass_every above 1).  Ironic stamps a node when it is written: here, when a
    listing finds it changed since the last (``listing`` holds live objects a test
    changes)."""

    def __init__(self, nodes, max_limit=1000):
        self.listing = nodes
        self.max_limit = max_limit  # Ironic's [api] max_limit: no page is longer
        self._seen = {}  # uuid: the node as the last listing found it

    def nodes(self, **query):
        return iter(self.listing)

    def _stamped(self):
        now = datetime.datetime.now(datetime.timezone.utc).isoformat()
        for node in self.listing:
            body = node.to_dict(computed=False, original_names=True)
            written = json.dumps({k: v for k, v in body.items()
                                  if k not in ("created_at", "updated_at")},
                                 sort_keys=True, default=str)
            if node.id not in self._seen:
                node.created_at = node.created_at or now
            elif self._seen[node.id] != written:
                node.updated_at = now
            self._seen[node.id] = written
        return self.listing

    def get_node(self, uuid, fields=None):
        found = [node for node in self.listing if node.id == uuid]
        if not found:
            raise sdk_exc.NotFoundException(f"node {uuid}")
        return found[0]

    def get_endpoint_data(self):
        return types.SimpleNamespace(min_microversion="1.1", max_microversion="1.96")

    def _get_connection(self):
        return None

    def get(self, url, params, **kwargs):
        """GET /nodes with Ironic's sort_key, sort_dir, limit and marker; as Ironic's, a
        list asked for some fields has no time stamps, nor may it ask for them, a page
        is cut to ``max_limit``, and a page as long as its limit links the next."""
        fields = params.get("fields", "").split(",") if "fields" in params else None
        if url.startswith("/nodes/") and url != "/nodes/detail":  # one node
            found = [n for n in self.listing if url == f"/nodes/{n.id}"]
            body = found and {k: v for k, v in found[0].to_dict(
                computed=False, original_names=True).items() if k in fields}
            return types.SimpleNamespace(status_code=200 if found else 404,
                                         json=lambda: body, headers=self.headers())
        assert (fields is None) == url.endswith("/detail"), (url, params)  # else a summary
        if fields and {"created_at", "updated_at"} & set(fields):
            return types.SimpleNamespace(status_code=400, json=lambda: {}, headers=self.headers(),
                                         reason="not a valid field", text="", url=url)
        key = params.get("sort_key", "id")
        ordered = sorted(self._stamped(), key=lambda n: (getattr(n, key) or "", n.id),
                         reverse=params.get("sort_dir") == "desc")
        ids = [n.id for n in ordered]
        start = ids.index(params["marker"]) + 1 if "marker" in params else 0
        limit = min(int(params["limit"]), self.max_limit)
        page = ordered[start:start + limit]
        body = {"nodes": [{k: v for k, v in n.to_dict(computed=False, original_names=True).items()
                           if not fields or k in fields or k in ("uuid", "id")}
                          for n in page]}
        if len(page) == limit:
            body["next"] = f"{url}?marker={page[-1].id}"
        return types.SimpleNamespace(status_code=200, json=lambda: body, headers=self.headers(),
                                     content=json.dumps(body, default=str).encode())

    @staticmethod
    def headers():
        return {"Date": email.utils.formatdate(usegmt=True)}


def owners_of(owned, node_ids):
    return {n: {h for h, nodes in owned.items() if n in nodes} for n in node_ids}


def test_a_rolling_switch_never_double_claims_or_orphans_a_node(nova_config, monkeypatch):
    """Three services switch to the subclass one at a time, with nova's real ring code."""
    fleet_ = Fleet(monkeypatch, HOSTS)
    free = [str(uuid.uuid4()) for _ in range(900)]
    busy = {}
    for h in (*HOSTS, "compute-gone"):  # each host's instances, and a dead host's
        for _ in range(5):
            instance = str(uuid.uuid4())
            fleet_.instances.setdefault(h, set()).add(instance)
            busy[str(uuid.uuid4())] = (h, instance)
    fleet_.instances.pop("compute-gone")
    nodes = [sdk_node.Node(id=n, instance_id=None) for n in free] + [
        sdk_node.Node(id=n, instance_id=i) for n, (_, i) in busy.items()]
    connection = FakeConnection(nodes)
    report = []
    for switched in range(len(HOSTS) + 1):
        kinds = {h: "ours" if i < switched else "nova" for i, h in enumerate(HOSTS)}
        owned = {h: Fleet.owned(Fleet.driver(kind, connection), h)
                 for h, kind in kinds.items()}
        owners = owners_of(owned, free)
        double = sum(len(o) > 1 for o in owners.values())
        orphaned = sum(not o for o in owners.values())
        report.append((switched, double, orphaned))
        assert (double, orphaned) == (0, 0), report
        for node, (host, _) in busy.items():  # instances: their own service only
            assert owners_of(owned, [node])[node] == ({host} if host in HOSTS else set())
    print("rolling switch (services switched, double-claimed, orphaned):", report)


def test_mixing_the_coordination_ring_with_nova_ring_is_why_a_group_switches_together(
        nova_config, monkeypatch):
    fleet_ = Fleet(monkeypatch, HOSTS)
    free = [str(uuid.uuid4()) for _ in range(900)]
    connection = FakeConnection([sdk_node.Node(id=n, instance_id=None) for n in free])
    owned = {HOSTS[0]: Fleet.owned(Fleet.driver("ours", connection), HOSTS[0],
                                   rp_reporter={"peers_from": "coordination"})}
    owned.update({h: Fleet.owned(Fleet.driver("nova", connection), h) for h in HOSTS[1:]})
    owners = owners_of(owned, free).values()
    assert sum(len(o) > 1 for o in owners) and sum(not o for o in owners)
    # ... and once all switched, the coordination ring alone splits them cleanly.
    owned = {h: Fleet.owned(Fleet.driver("ours", connection), h,
                            rp_reporter={"peers_from": "coordination"}) for h in HOSTS}
    assert all(len(o) == 1 for o in owners_of(owned, free).values())
    del fleet_


def test_a_release_during_novas_refresh_is_not_undone_by_it(nova_config, monkeypatch):
    """A member joins while nova's refresh lists Ironic (seconds under load): the renewals
    release its share at once, and the refresh's result, built on the ring of its start,
    does not bring that share back (waiting for the refresh, then keeping its result, a
    returning service's free nodes had two managers for 6.1 s)."""
    CONF.set_override("peers_from", "coordination", group="rp_reporter")
    CONF.set_override("host", HOSTS[0])
    free = {n: sdk_node.Node(id=n, instance_id=None)
            for n in (str(uuid.uuid4()) for _ in range(300))}
    driver = Fleet.driver("ours")
    forgotten = set()
    members = {HOSTS[0], HOSTS[1]}
    ring = driver._coordinated_ring()
    # nova's report client, as far as a release touches it (nova 34: no write-back guard).
    monkeypatch.setattr(ring.provider_cache, "_client_of", lambda: type(
        "ReportClient", (), {"invalidate_resource_provider": staticmethod(forgotten.add),
                             "get_provider_subtree_and_ensure_root": None})())
    monkeypatch.setattr(ring, "members", lambda: set(members))

    def mine(on):
        ring = driver._coordinated_ring().ring_of(on)
        return {n: node for n, node in free.items()
                if HOSTS[0] in ring.get_nodes(n.encode())}

    def novas_refresh(self):
        listed = mine({HOSTS[0], HOSTS[1]})  # the ring at the refresh's start
        members.add(HOSTS[2])  # meanwhile a service joins; the renewals release to it
        renewal = threading.Thread(target=ring.release_to_new_ring)
        renewal.start()
        renewal.join(5)
        self.node_cache = listed  # nova assigns what it built, at its end
    monkeypatch.setattr(nova_driver.IronicDriver, "_refresh_cache", novas_refresh)
    driver.node_cache = mine({HOSTS[0], HOSTS[1]})
    ring._managed = set(driver.node_cache)
    try:
        driver._refresh_cache()
    finally:
        CONF.clear_override("peers_from", group="rp_reporter")
        CONF.clear_override("host")
    given_away = set(mine({HOSTS[0], HOSTS[1]})) - set(mine(set(HOSTS)))
    assert given_away  # the new member's share of this service's nodes
    assert not given_away & set(driver.node_cache)
    assert set(driver.node_cache) == set(mine(set(HOSTS)))
    # nova's provider cache forgets them: taken back later, their first write is fresh.
    assert forgotten == given_away


class DownHosts:
    """nova's servicegroup API, with these hosts reported down."""

    def __init__(self, down):
        self.down = set(down)

    def service_is_up(self, service):
        return service.host not in self.down


class NodeLookup:
    """nova's openstacksdk baremetal proxy, for get_node only: these nodes exist (with
    the instance Ironic names on each); ``failing`` ones answer 500."""

    def __init__(self, nodes, failing=()):
        self.nodes = dict(nodes)
        self.failing = set(failing)

    def get_node(self, node, fields=None):
        if node in self.failing:
            raise sdk_exc.HttpException(f"node {node}: 500 Internal Server Error")
        if node not in self.nodes:
            raise sdk_exc.NotFoundException(f"node {node} not found")
        return sdk_node.Node(id=node, shard=None, conductor_group="",
                             instance_id=self.nodes[node])


class Locks:
    """A membership's locks: each taken (or not, ``held``) and recorded."""

    def __init__(self, held=True):
        self.held, self.taken = held, []

    @contextlib.contextmanager
    def lock(self, name):
        self.taken.append(name)
        yield self.held


class Cell:
    """What nova's database says, for the re-homing job: services (host -> forced down,
    report count), instances (host -> [Instance]); ``moves`` what the job wrote, in order."""

    last = None  # the latest cell made: the default record's

    def __init__(self, monkeypatch, services, instances):
        self.services, self.instances, self.moves = dict(services), instances, []
        Cell.last = self
        monkeypatch.setattr(objects.ServiceList, "get_by_binary",
                            lambda ctxt, binary, include_disabled=False: [
                                self.service(h) for h in self.services])
        monkeypatch.setattr(objects.Service, "get_by_compute_host",
                            lambda ctxt, host: self.service(host))
        monkeypatch.setattr(objects.Service, "save", lambda svc: self.moves.append(
            ("forced down", svc.host)) or self.services.update({svc.host: (
                svc.forced_down, self.services[svc.host][1])}))
        monkeypatch.setattr(objects.InstanceList, "get_by_host",
                            lambda ctxt, host, expected_attrs=None: [
                                i for i in self.all() if i.host == host])
        monkeypatch.setattr(objects.Instance, "get_by_uuid",
                            lambda ctxt, uuid, expected_attrs=None: next(
                                i for i in self.all() if i.uuid == uuid))
        monkeypatch.setattr(rehome.Rehoming, "_move_instance", staticmethod(
            lambda ctxt, instance, fenced_host, members=(), check=None: self.moves.append(
                ("instance", instance.uuid)) or setattr(instance, "host", CONF.host) or True))
        monkeypatch.setattr(rehome.Rehoming, "_move_compute_node", staticmethod(
            lambda ctxt, node: self.moves.append(("compute node", node))))
        monkeypatch.setattr(rehome.Rehoming, "_record_action", staticmethod(
            lambda ctxt, uuid: None))

    def all(self):
        return [i for held in self.instances.values() for i in held]

    def service(self, host):
        if host not in self.services:
            raise exception.ComputeHostNotFound(host=host)
        forced, reports = self.services[host]
        return objects.Service(host=host, forced_down=forced, report_count=reports,
                               updated_at=None)


def a_record(hosts, group="nova-g"):
    """The group's real record (``group_record``) in a tooz backend of its own
    (``file://``, a fresh directory), ``hosts`` recorded as members."""
    backend = membership.Group(f"file://{tempfile.mkdtemp(prefix='rp-reporter-record-')}",
                               group, "the-test").start()
    record = group_record.GroupRecord(group, backend.durable)
    for host in hosts:
        record.join(host)
    return record


class NotLapsed:
    """A self-fence whose service's lease never lapsed: every check lets it act."""

    @staticmethod
    def check(what, confirm=False):
        pass


def rehoming_job(members, ironic, down=(), locks=None, record=None):
    """The re-homing job of compute-a, with ``members`` live and ``down`` reported down by
    nova, whose report watch has watched long enough; ``record``: the group's record
    (every service of the cell, by default)."""
    driver = Fleet.driver("ours", ironic)
    ring = driver._coordinated_ring()
    ring.members = ring.members_now = lambda: set(members)
    ring.membership = locks or Locks()
    ring.record = record or a_record(Cell.last.services)
    job = rehome.Rehoming(ring, lambda: ironic, driver._problems, driver._metrics)
    job.fence.watch = rehoming.ReportWatch(0)  # stalled at first sight
    job.fence._servicegroup = DownHosts(down)
    return job


def an_instance(host, node):
    return objects.Instance(uuid=str(uuid.uuid4()), node=node, host=host, task_state=None,
                            system_metadata={})


def test_a_fenced_service_is_found_by_its_instances_not_its_node_records(
        nova_config, monkeypatch):
    """A mover that dies between its two steps leaves the instance on itself and the
    node's record on the first dead service; by the time it is fenced the survivors may
    have taken all its free nodes, so no Ironic compute node record names it.  Its
    instance is still found and moved; an instance of another driver (a hypervisor
    hostname) and one on a node Ironic no longer has are left alone, with no error."""
    dead_mover, ironic_node, gone_node = "compute-mover", str(uuid.uuid4()), str(uuid.uuid4())
    instances = {dead_mover: [an_instance(dead_mover, node)
                              for node in (ironic_node, gone_node, "libvirt-host-7")]}
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 5), dead_mover: (False, 9)}, instances)
    lookup = NodeLookup({ironic_node: instances[dead_mover][0].uuid})
    job = rehoming_job({HOSTS[0]}, lookup, down=[dead_mover])
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [("forced down", dead_mover),
                          ("instance", instances[dead_mover][0].uuid),
                          ("compute node", ironic_node)]
    assert job.counts == {"fenced": 1, "moved": 1, "refused": 1}
    assert job.metrics.rehoming.labels("moved")._value.get() == 1  # what /metrics shows


def test_a_new_service_moves_nothing_before_nova_made_its_record(nova_config, monkeypatch):
    """nova runs init_host before it creates a new host's Service record: a move then
    stranded a server on a service that failed to start (ComputeHostNotFound)."""
    node = str(uuid.uuid4())
    instances = {"compute-dead": [an_instance("compute-dead", node)]}
    cell = Cell(monkeypatch, {"compute-dead": (False, 3)}, instances)
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: instances["compute-dead"][0].uuid}),
                       down=["compute-dead"])
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == []
    cell.services[HOSTS[0]] = (False, 1)  # nova made it: the next round moves
    job.run_once(nova_context.get_admin_context())
    assert ("instance", instances["compute-dead"][0].uuid) in cell.moves


@pytest.mark.parametrize("came_back", ["rejoined the group", "reported to nova"])
def test_a_service_back_while_its_nodes_were_read_is_never_forced_down(
        nova_config, monkeypatch, came_back):
    """The mover reads each server's node in Ironic (seconds under load) between finding
    a service fenced and forcing it down: one that came back meanwhile (and so already
    cleared a mover's flag once) is read again right before the write, and left up."""
    node = str(uuid.uuid4())
    instances = {"compute-dead": [an_instance("compute-dead", node)]}
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)}, instances)
    lookup = NodeLookup({node: instances["compute-dead"][0].uuid})
    job = rehoming_job({HOSTS[0]}, lookup, down=["compute-dead"])
    read = lookup.get_node

    def back_while_read(node, fields=None):
        if came_back == "rejoined the group":
            job.ring.members_now = lambda: {HOSTS[0], "compute-dead"}
        else:
            cell.services["compute-dead"] = (False, 4)
        return read(node, fields)
    lookup.get_node = back_while_read
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and cell.services["compute-dead"][0] is False
    lookup.get_node = read  # still away at the next round: fenced and moved then
    job.ring.members_now = lambda: {HOSTS[0]}
    job.fence.watch = rehoming.ReportWatch(0)
    job.run_once(nova_context.get_admin_context())
    assert cell.moves[0] == ("forced down", "compute-dead")


def test_builds_queued_to_a_fenced_service_are_those_booked_on_nodes_taken_from_it(
        nova_config, monkeypatch):
    """The free nodes this service claims when a member leaves: what is booked on each
    as nova's resource tracker first looks at it here (before it moves the record, and
    so before the scheduler casts a build here) was cast to the member that left; once
    that one is fenced, its builds that no service took are ended, once."""
    CONF.set_override("host", HOSTS[0])
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)}, {})
    job = rehoming_job({HOSTS[0], HOSTS[1]}, NodeLookup({}), down=["compute-dead"])
    ring = job.ring
    ring.self_fence = NotLapsed()  # servers move between these services
    nodes = [str(uuid.uuid4()) for _ in range(40)]
    before, now = {HOSTS[0], HOSTS[1], "compute-dead"}, {HOSTS[0], HOSTS[1]}
    mine_before = {n for n in nodes if HOSTS[0] in ring.ring_of(before).get_nodes(n.encode())}
    mine_now = {n for n in nodes if HOSTS[0] in ring.ring_of(now).get_nodes(n.encode())}
    taken = sorted(mine_now - mine_before)
    assert taken
    booked = {taken[0]: {"queued-build": {}}}
    reads = []

    class ReportClient:
        update_from_provider_tree = invalidate_resource_provider = staticmethod(
            lambda *args, **kwargs: None)  # the driver's provider cache's guard

        @staticmethod
        def get_allocations_for_resource_provider(ctxt, node):
            reads.append(node)
            return types.SimpleNamespace(allocations=dict(booked.get(node, {})))
    ring.driver.virtapi = types.SimpleNamespace(
        _compute=types.SimpleNamespace(reportclient=ReportClient()))
    job.manager = lambda: ring.driver.virtapi._compute
    ended = []
    monkeypatch.setattr(queued_builds, "end", lambda ctxt, client, host, found: ended.append(
        (host, found)) or found)
    try:
        ring.now_managing(mine_before, "the start")
        ring.ring_members, ring._members_before = now, before  # compute-dead left
        ring.now_managing(mine_now, "nova's node refresh")
        assert set(ring.taken_from) == set(taken)
        for node in sorted(mine_now):
            ring.first_look(node)
        ring.first_look(taken[0])  # read once: later bookings are this service's builds
        assert sorted(reads) == taken
        job.run_once(nova_context.get_admin_context())
        assert ended == [("compute-dead", {taken[0]: {"queued-build"}})]
        assert ring.record.queued() == {}  # settled: erased from the group's record
        job.run_once(nova_context.get_admin_context())
        assert len(ended) == 1 and ring.taken_from == {}
        # A member back in the group takes its own queued builds: nothing is ended.
        ring._managed = set(mine_before)
        ring.now_managing(mine_now, "nova's node refresh")
        ring.ring_members = {*now, "compute-dead"}
        job.ring.members = lambda: {*now, "compute-dead"}
        job.run_once(nova_context.get_admin_context())
        assert len(ended) == 1 and ring.taken_from == {}
        assert cell.moves == []
    finally:
        CONF.clear_override("host")


def test_a_queued_build_outlives_a_failed_round_and_its_survivors_restart(
        nova_config, monkeypatch):
    """The durable intent of ending a queued build: the survivor that read it on the node
    it took over records it in the group's record at once; a round that settles nothing
    (Placement or the bus down) keeps it; a survivor restarted since (nothing in its
    memory) and any other survivor find it there; it goes once settled.  It once left
    the survivor's memory before the round's first write."""
    CONF.set_override("host", HOSTS[0])
    Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)}, {})
    job = rehoming_job({HOSTS[0]}, NodeLookup({}), down=["compute-dead"])
    node = str(uuid.uuid4())
    job.ring.taken_from[node] = ("compute-dead", None)
    job.ring.driver.virtapi = types.SimpleNamespace(_compute=types.SimpleNamespace(
        reportclient=types.SimpleNamespace(
            get_allocations_for_resource_provider=lambda ctxt, node: types.SimpleNamespace(
                allocations={"queued-build": {}}))))
    job.manager = lambda: job.ring.driver.virtapi._compute
    rounds = []
    settles = [{}, {}, {node: {"queued-build"}}]  # two rounds fail, the third settles it
    monkeypatch.setattr(queued_builds, "end", lambda ctxt, client, host, found: rounds.append(
        found) or settles[len(rounds) - 1])
    try:
        job.ring.first_look(node)
        assert job.ring.record.queued() == {"compute-dead": {node: {"queued-build"}}}
        job.run_once(nova_context.get_admin_context())
        restarted = rehoming_job({HOSTS[0]}, NodeLookup({}), down=["compute-dead"],
                                 record=job.ring.record)
        restarted.manager = job.manager
        assert restarted.ring.taken_from == {}
        for survivor in (restarted, restarted):
            survivor.run_once(nova_context.get_admin_context())
        assert rounds == [{node: {"queued-build"}}] * 3  # the last two: the restarted's
        assert job.ring.record.queued() == {}
        restarted.run_once(nova_context.get_admin_context())
        assert len(rounds) == 3  # settled: never again
    finally:
        CONF.clear_override("host")


def test_a_step_that_fails_after_the_server_moved_is_finished_by_its_mover(
        nova_config, monkeypatch):
    """The server homed here, then the compute node record's write fails (nova-conductor
    restarting): the server is no longer on the fenced service, so no round would find
    it there again; its mover finishes the steps left at its next rounds, in order, and
    nova's start-up handling of the server runs once they are done."""
    node = str(uuid.uuid4())
    instance = an_instance("compute-dead", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)},
                {"compute-dead": [instance]})
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: instance.uuid}), down=["compute-dead"])
    failing = [RuntimeError("nova-conductor: MessagingTimeout")]
    written = rehome.Rehoming._move_compute_node

    def compute_node(ctxt, node):
        if failing:
            raise failing.pop()
        written(ctxt, node)
    monkeypatch.setattr(rehome.Rehoming, "_move_compute_node", staticmethod(compute_node))
    recovered = []
    monkeypatch.setattr(recovery, "recover", lambda manager, ctxt, found, fenced: (
        recovered.append((found.uuid, fenced))))
    job.manager = lambda: "nova's manager"
    CONF.set_override("host", HOSTS[0])
    try:
        job.run_once(nova_context.get_admin_context())
        assert cell.moves[-1] == ("instance", instance.uuid) and recovered == []
        assert job.counts["failed"] == 1
        job.run_once(nova_context.get_admin_context())
    finally:
        CONF.clear_override("host")
    assert cell.moves[-1] == ("compute node", node)
    assert recovered == [(instance.uuid, "compute-dead")]
    assert job._unfinished == {} and job.counts["moved"] == 1


def test_one_nodes_error_is_its_own_and_the_others_move(nova_config, monkeypatch):
    nodes = sorted(str(uuid.uuid4()) for _ in range(3))
    instances = {"compute-dead": [an_instance("compute-dead", n) for n in nodes]}
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)}, instances)
    lookup = NodeLookup({i.node: i.uuid for i in instances["compute-dead"]},
                        failing=[nodes[1]])
    job = rehoming_job({HOSTS[0]}, lookup, down=["compute-dead"])
    job.run_once(nova_context.get_admin_context())
    assert [m[1] for m in cell.moves if m[0] == "compute node"] == [nodes[0], nodes[2]]
    assert job.counts["failed"] == 1


def test_a_server_moves_once_however_the_survivors_views_differ(nova_config, monkeypatch):
    """Two survivors that both think they own the node (a stale member list, a backend
    that lost its data): the one without the node's lock moves nothing, and one that
    takes the lock after the other moved reads the server's new home and moves nothing."""
    node = str(uuid.uuid4())
    instance = an_instance("compute-dead", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)},
                {"compute-dead": [instance]})
    lookup = NodeLookup({node: instance.uuid})
    locks = Locks(held=False)
    rehoming_job({HOSTS[0]}, lookup, ["compute-dead"], locks).run_once(
        nova_context.get_admin_context())
    assert locks.taken == [f"rehome-{node}"]
    assert [m for m in cell.moves if m[0] != "forced down"] == []
    moved_by_other = objects.Instance.get_by_uuid
    monkeypatch.setattr(objects.Instance, "get_by_uuid", lambda ctxt, uuid, **kw: (
        setattr(instance, "host", HOSTS[1]) or moved_by_other(ctxt, uuid)))
    rehoming_job({HOSTS[0]}, lookup, ["compute-dead"]).run_once(
        nova_context.get_admin_context())
    assert [m for m in cell.moves if m[0] != "forced down"] == []


class Row:
    """One server's row in nova's database, for the instance step of a move: ``save`` is
    nova's compare-and-swap on the task state (``expected_task_state``) writing what
    changed, ``read`` a fresh read; ``actions`` the instance actions started, by host;
    ``on_read`` runs once, at the next read, before it (another mover's steps,
    interleaved)."""

    def __init__(self, monkeypatch, instance):
        self.uuid, self.node = instance.uuid, instance.node
        self.values = {"host": instance.host, "task_state": instance.task_state,
                       "system_metadata": {}}
        self.actions, self.on_read = [], None

        def save(obj, expected_task_state=None):
            if self.values["task_state"] not in expected_task_state:
                raise exception.UnexpectedTaskStateError(
                    instance_uuid=obj.uuid, expected=expected_task_state,
                    actual=self.values["task_state"])
            # Only what changed, as nova's save writes it.
            self.values.update({field: getattr(obj, field)
                                for field in obj.obj_what_changed() & set(self.values)})
            self.values["system_metadata"] = dict(self.values["system_metadata"])
            obj.obj_reset_changes()

        monkeypatch.setattr(objects.Instance, "save", save)
        monkeypatch.setattr(objects.Instance, "get_by_uuid",
                            lambda ctxt, uuid, expected_attrs=None: self.read())
        monkeypatch.setattr(objects.InstanceAction, "action_start",
                            lambda ctxt, uuid, action, want_result=False:
                            self.actions.append(CONF.host))
        monkeypatch.setattr(objects.InstanceActionEvent, "event_start",
                            lambda ctxt, uuid, action, want_result=False, host=None: None)
        monkeypatch.setattr(objects.InstanceActionEvent, "event_finish",
                            lambda ctxt, uuid, action, want_result=False: None)

    def read(self):
        interleaved, self.on_read = self.on_read, None
        if interleaved:
            host = CONF.host
            interleaved()
            CONF.set_override("host", host)
        found = objects.Instance(uuid=self.uuid, node=self.node,
                                 **{**self.values,
                                    "system_metadata": dict(self.values["system_metadata"])})
        found.obj_reset_changes()
        return found


def move_as(host, instance, fenced_host="compute-dead"):
    """The instance step of a move, by the mover on ``host``, and its action once moved."""
    CONF.set_override("host", host)
    ctxt = nova_context.get_admin_context()
    try:
        moved = rehome.Rehoming._move_instance(ctxt, instance, fenced_host)
        if moved:
            rehome.Rehoming._record_action(ctxt, instance.uuid)
        return moved
    finally:
        CONF.clear_override("host")


def test_two_movers_that_both_read_the_server_on_the_dead_service_move_it_once(
        nova_config, monkeypatch):
    """The node's lock lost with the coordination backend's data, or two survivors with
    different views of the members: both read the server on the dead service before
    either moved it.  The first moves it; the second's claim succeeds (the task state is
    clear again) but its read under the claim finds the server moved: it gives the claim
    back and writes nothing.  One host, one instance action, never a flip."""
    row = Row(monkeypatch, an_instance("compute-dead", str(uuid.uuid4())))
    read_by_a, read_by_b = row.read(), row.read()
    assert move_as(HOSTS[0], read_by_a) is True
    assert move_as(HOSTS[1], read_by_b) is False
    assert row.values == {"host": HOSTS[0], "task_state": None, "system_metadata": {}}
    assert row.actions == [HOSTS[0]]


def test_a_mover_whose_claim_was_taken_over_writes_nothing(nova_config, monkeypatch):
    """A slow mover (paused just after its claim) whose claim another mover took over
    (it read the claim, as a dead mover's is read, and moved the server): the slow one
    reads the server moved and its next write fails its expected-task-state check.  The
    task state the dead service left (a reboot) is the server's again, for its new
    home's start-up handling (``recovery``)."""
    row = Row(monkeypatch, an_instance("compute-dead", str(uuid.uuid4())))
    row.values["task_state"] = "rebooting"  # the dead service died in a reboot
    slow = row.read()
    row.on_read = lambda: move_as(HOSTS[1], row.read())  # before the slow one reads again
    with pytest.raises(exception.UnexpectedTaskStateError):
        move_as(HOSTS[0], slow)
    assert row.values == {"host": HOSTS[1], "task_state": "rebooting", "system_metadata": {}}
    assert row.actions == [HOSTS[1]]


def test_a_service_whose_reports_go_on_is_not_fenced_by_a_skewed_clock(
        nova_config, monkeypatch):
    """A survivor whose wall clock runs ahead by more than service_down_time: nova's own
    answer calls every service down; the report watch, on this service's monotonic clock,
    sees the cut-off service's reports go on, and nothing moves."""
    node = str(uuid.uuid4())
    instance = an_instance("compute-cut", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-cut": (False, 3)},
                {"compute-cut": [instance]})
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: instance.uuid}),
                       down=[HOSTS[0], "compute-cut"])
    job.fence.watch = rehoming.ReportWatch(CONF.service_down_time)
    for reports in range(4, 8):  # it reports, a round sees each
        cell.services["compute-cut"] = (False, reports)
        job.run_once(nova_context.get_admin_context())
    assert cell.moves == []


def test_an_operation_on_a_server_moved_away_is_refused_before_ironic_is_called(
        nova_config, monkeypatch):
    """A service paused past its lease resumes with a reboot queued for a server a
    survivor re-homed meanwhile: the driver reads the server's home and refuses."""
    CONF.set_override("host", HOSTS[0])
    node = str(uuid.uuid4())
    instance = an_instance(HOSTS[1], node)
    Cell(monkeypatch, {HOSTS[0]: (False, 1), HOSTS[1]: (False, 1)}, {HOSTS[1]: [instance]})
    ironic = FakeConnection([])
    asked = []
    ironic.nodes = lambda **query: asked.append(query) or iter(())
    driver = Fleet.driver("ours", ironic)
    driver._rehoming = object()  # servers can move between these services
    try:
        # Never nova's InstanceNotFound: nova's manager would take the server as gone and
        # deallocate its ports; a destroy's refusal is a power-off failure, which nova's
        # manager re-raises without touching the network.
        with pytest.raises(guard.Refused, match=f"homed on {HOSTS[1]}") as raised:
            driver.reboot(nova_context.get_admin_context(), instance, None, "SOFT")
        assert not isinstance(raised.value, exception.InstanceNotFound)
        with pytest.raises(exception.InstancePowerOffFailure) as raised:
            driver.destroy(nova_context.get_admin_context(), instance, None)
        assert not isinstance(raised.value, exception.InstanceNotFound)
        for name in ("prepare_for_spawn", "failed_spawn_cleanup"):  # a build's steps too
            with pytest.raises(guard.Refused):
                getattr(driver, name)(instance)
        assert asked == []
        instance.host = HOSTS[0]  # homed here: nova's own reboot runs, asking Ironic
        with pytest.raises(exception.InstanceNotFound) as raised:
            driver.reboot(nova_context.get_admin_context(), instance, None, "SOFT")
        assert not isinstance(raised.value, guard.Refused)
        assert asked and asked[0]["instance_id"] == instance.uuid
    finally:
        CONF.clear_override("host")


# ---------------------------------------------------------------------------
# The same provider from the agent and from the driver, for every node state.

PROVISION_STATES = sorted(
    {v for k, v in vars(ironic_states).items() if k.isupper() and isinstance(v, str)
     and k not in ("POWER_ON", "POWER_OFF", "REBOOT", "SOFT_REBOOT", "SOFT_POWER_OFF")}
    - {ironic_states.POWER_ON, ironic_states.POWER_OFF}) + [None]
POWER_STATES = ["power on", "power off", "rebooting", "error", None]
node_traits = st.sets(st.sampled_from(
    ["CUSTOM_GPU", "CUSTOM_A", "HW_CPU_X86_AVX2", "COMPUTE_NODE", "CUSTOM_RPR_MANAGED",
     "CUSTOM_RPR_ADDED_CUSTOM_A", "CUSTOM_RPR_X",
     # Invalid names: both drop the one trait and report the node's state.
     "custom_lower", "CUSTOM_HAS-DASH", "CUSTOM_" + "X" * 300]), max_size=4)
provider_traits = st.sets(st.sampled_from(
    ["CUSTOM_GPU", "CUSTOM_OLD", "CUSTOM_RPR_ADDED_CUSTOM_GPU", "CUSTOM_RPR_ADDED_CUSTOM_OLD",
     "COMPUTE_NODE", "COMPUTE_STATUS_DISABLED", "OWNER_NOVA", "CUSTOM_RPR_MANAGED"]),
    max_size=5)
classes = st.sampled_from([None, "", "baremetal-gold", "baremetal-silver", "---", "x" * 300])
previous_inventory = st.dictionaries(
    st.sampled_from(["CUSTOM_BAREMETAL_GOLD", "CUSTOM_BAREMETAL_SILVER"]),
    st.integers(0, 1).map(model.inventory), max_size=2)


@pytest.fixture(scope="module")
def lone_driver(nova_config):
    return Fleet.driver("ours")


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(provision=st.sampled_from(PROVISION_STATES), power=st.sampled_from(POWER_STATES),
       maintenance=st.booleans(), instance=st.booleans(), resource_class=classes,
       traits=node_traits, before_inventory=previous_inventory, before_traits=provider_traits,
       skip_reserve=st.booleans())
def test_agent_and_driver_give_the_same_provider_for_every_node_state(
        lone_driver, provision, power, maintenance, instance, resource_class, traits,
        before_inventory, before_traits, skip_reserve):
    node_id = str(uuid.uuid4())
    instance_id = str(uuid.uuid4()) if instance else None
    # The driver: nova's node object, nova's ProviderTree holding the provider as it was.
    node = sdk_node.Node(id=node_id, resource_class=resource_class, provision_state=provision,
                         power_state=power, is_maintenance=maintenance,
                         instance_id=instance_id, traits=sorted(traits), properties={})
    lone_driver.node_cache = {node_id: node}
    lone_driver.node_cache_time = time.time()
    tree = nova_provider_tree.ProviderTree()
    tree.new_root(node_id, node_id)
    tree.update_inventory(node_id, before_inventory)
    tree.update_traits(node_id, before_traits)
    CONF.set_override("skip_reserve_in_use_ironic_nodes", skip_reserve, group="workarounds")
    try:
        lone_driver.update_provider_tree(tree, node_id)
    finally:
        CONF.clear_override("skip_reserve_in_use_ironic_nodes", group="workarounds")
    data = tree.data(node_id)
    # The agent: the API record, desired(), the plan applied to the same provider (an
    # instance's allocation is on the class the node carried).
    record = {"uuid": node_id, "resource_class": resource_class, "provision_state": provision,
              "power_state": power, "maintenance": maintenance, "instance_uuid": instance_id,
              "traits": sorted(traits)}
    desired = model.desired(model.node_from_api(record), skip_reserve_in_use=skip_reserve)
    observed = planner.Observed(node_id, 3, before_inventory, frozenset(before_traits),
                                {rc: 1 for rc in before_inventory} if instance else {})
    after = planner.apply(observed, planner.plan(desired, observed))
    assert dict(data.inventory) == after.inventories
    # The driver keeps the marker where it is and does not add it.
    marker_added = {model.MANAGED_TRAIT} - set(before_traits)
    assert set(data.traits) == after.traits - marker_added
    # ... and where nova reports the node, the inventory is nova's.
    if desired.resource_class and not (instance and set(before_inventory) - {
            desired.resource_class}):
        nova_tree = nova_provider_tree.ProviderTree()
        nova_tree.new_root(node_id, node_id)
        CONF.set_override("skip_reserve_in_use_ironic_nodes", skip_reserve,
                          group="workarounds")
        try:
            nova_driver.IronicDriver.update_provider_tree(lone_driver, nova_tree, node_id)
        finally:
            CONF.clear_override("skip_reserve_in_use_ironic_nodes", group="workarounds")
        assert dict(nova_tree.data(node_id).inventory) == dict(data.inventory)
        assert set(nova_tree.data(node_id).traits) == desired.traits | desired.refused_traits


# ---------------------------------------------------------------------------
# Against the real Ironic.

@pytest.fixture
def real_ironic(nova_config, stack):
    CONF.set_override("auth_type", "none", group="ironic")
    CONF.set_override("endpoint_override", stack.ironic_url, group="ironic")
    yield
    CONF.clear_override("auth_type", group="ironic")
    CONF.clear_override("endpoint_override", group="ironic")


def test_sharded_deployment_two_shards_two_services_each(real_ironic, stack, ironic,
                                                          monkeypatch):
    """With [ironic] shard set, nova's ring is the service alone: it owns its whole shard."""
    shard_b = clients.Ironic(stack.ironic_url, ironic.shard + "-b")
    services = {"shard-a-1": ironic, "shard-a-2": ironic,
                "shard-b-1": shard_b, "shard-b-2": shard_b}
    fleet_ = Fleet(monkeypatch, services)
    nodes = {name: set(s.create_many(6, state="enroll")) for name, s in
             (("a", ironic), ("b", shard_b))}
    for host, shard in (("shard-a-1", ironic), ("shard-b-2", shard_b)):
        node = shard.create(state="enroll")  # an instance each of two services manages
        instance = str(uuid.uuid4())
        shard.patch(node, instance_uuid=instance)
        fleet_.instances[host].add(instance)
        nodes[(host, "busy")] = node
    owned = {}
    for host, shard in services.items():
        per_class = {kind: Fleet.owned(Fleet.driver(kind), host,
                                       ironic={"shard": shard.shard}) for kind in CLASSES}
        assert per_class["ours"] == per_class["nova"], host  # exactly nova's choice
        owned[host] = per_class["ours"]
    for host in ("shard-a-1", "shard-a-2"):
        assert nodes["a"] <= owned[host] and not owned[host] & nodes["b"]
    for host in ("shard-b-1", "shard-b-2"):
        assert nodes["b"] <= owned[host] and not owned[host] & nodes["a"]
    assert nodes[("shard-a-1", "busy")] in owned["shard-a-1"]
    assert nodes[("shard-a-1", "busy")] not in owned["shard-a-2"]
    assert nodes[("shard-b-2", "busy")] in owned["shard-b-2"]
    assert nodes[("shard-b-2", "busy")] not in owned["shard-b-1"]


def test_conductor_group_deployment_with_peer_lists(real_ironic, stack, ironic, monkeypatch):
    """[ironic] conductor_group + peer_list: nova's ring over the peers that are up; a peer
    list without the service itself is refused, as nova refuses it."""
    group = ""  # the local stack's conductor serves the default group
    peers = ["group-1", "group-2"]
    fleet_ = Fleet(monkeypatch, [*peers, "elsewhere", "other-group"])
    free = set(ironic.create_many(12, state="enroll"))
    busy = ironic.create(state="enroll")
    instance = str(uuid.uuid4())
    ironic.patch(busy, instance_uuid=instance)
    fleet_.instances["group-2"].add(instance)
    config = {"conductor_group": group, "peer_list": peers}
    owned = {}
    for host in peers:
        per_class = {kind: Fleet.owned(Fleet.driver(kind), host, ironic=config)
                     for kind in CLASSES}
        assert per_class["ours"] == per_class["nova"], host  # exactly nova's choice
        owned[host] = per_class["ours"]
    assert all(len(o) == 1 for o in owners_of(owned, free).values())  # one owner each
    assert all(owned[h] & free for h in peers)  # both got a share
    assert busy in owned["group-2"] and busy not in owned["group-1"]
    # A service of another group sees none of these nodes.
    for kind in CLASSES:
        assert not Fleet.owned(Fleet.driver(kind), "other-group",
                               ironic={"conductor_group": "other",
                                       "peer_list": ["other-group"]}) & free
    # A peer list without the service itself: nova refuses it, and so do we.
    for kind in CLASSES:
        with pytest.raises(exception.InvalidPeerList):
            Fleet.owned(Fleet.driver(kind), "elsewhere", ironic=config)


def listing_driver(kind="ours"):
    """A driver of ``kind`` with full_pass_every 4 (ours lists what changed)."""
    CONF.set_override("full_pass_every", 4, group="rp_reporter")
    try:
        return Fleet.driver(kind)
    finally:
        CONF.clear_override("full_pass_every", group="rp_reporter")


def refreshed(driver, shard):
    """nova's node refresh of ``driver`` (host HOSTS[0], [ironic] shard ``shard``); its
    node cache."""
    for name, group, value in (("host", None, HOSTS[0]), ("shard", "ironic", shard)):
        CONF.set_override(name, value, group=group)
    try:
        driver._refresh_cache()
    finally:
        CONF.clear_override("host")
        CONF.clear_override("shard", group="ironic")
    return driver.node_cache


def test_the_fleet_listed_where_it_changed_is_what_novas_own_listing_gives(
        real_ironic, ironic, monkeypatch):
    """With full_pass_every above 1, nova's node refresh lists the whole fleet at the
    start and then the nodes Ironic wrote since: through each kind of write nova reads
    (maintenance, properties, a server of another service's, a node created), nova's
    cache holds what nova's own driver lists, field by field; a node deleted from Ironic
    leaves once the scope's uuids are listed (``in_scope``, before nova's periodic looks
    at a node no listing held since its last look) or at the next whole listing."""
    Fleet(monkeypatch, HOSTS[:1])
    drivers = {kind: listing_driver(kind) for kind in CLASSES}
    clock = [0.0]
    drivers["ours"]._listing.clock = lambda: clock[0]
    drivers["ours"]._listing._in_background = lambda work: work()  # a due one at once
    requests = drivers["ours"]._metrics.node_list_requests

    def caches():
        """Each driver's node cache after a node refresh: {uuid: nova's fields}."""
        found = {}
        for kind, driver in drivers.items():
            found[kind] = {uuid_: periodic.fingerprint(node)
                           for uuid_, node in refreshed(driver, ironic.shard).items()}
        return found

    nodes = ironic.create_many(4)
    first = caches()
    assert first["ours"] == first["nova"] and set(first["ours"]) == set(nodes)
    ironic.set_maintenance(nodes[0], True)
    ironic.patch(nodes[1], properties={"cpu_arch": "aarch64", "memory_mb": 4096})
    ironic.patch(nodes[2], instance_uuid=str(uuid.uuid4()))  # another service's server
    new = ironic.create()
    for _ in range(2):  # and again, nothing written meanwhile
        found = caches()
        assert found["ours"] == found["nova"]
        assert set(found["ours"]) == {nodes[0], nodes[1], nodes[3], new}
    assert requests.labels("full")._value.get() == 1
    assert requests.labels("changes")._value.get() == 4  # two sorted requests a refresh
    for deleted in (nodes[3], nodes[0]):
        ironic.delete(deleted)
        found = caches()
        assert deleted in found["ours"] and deleted not in found["nova"]
    # The listing of the scope's uuids tells every node gone at once; the whole listing
    # would too, a full pass on.
    listing = drivers["ours"]._listing
    assert listing.in_scope([nodes[1], nodes[3], nodes[0]]) == {nodes[1]}
    assert requests.labels("check")._value.get() == 1
    found = caches()
    assert found["ours"] == found["nova"] and not {nodes[3], nodes[0]} & set(found["ours"])
    clock[0] += drivers["ours"]._periodic.passes.longest_s
    found = caches()
    assert found["ours"] == found["nova"]
    assert requests.labels("full")._value.get() == 2


def test_a_page_whose_marker_was_deleted_meanwhile_is_read_from_the_node_before(
        real_ironic, ironic, monkeypatch):
    """Nodes deleted while nova's refresh lists the fleet (a mass decommission): the
    next page's marker, the last node of the page read, may be gone before that page is
    asked for, and Ironic answers 404 (it looks the marker up).  The listing reads on
    from the page's last node still there: no failed refresh (VirtDriverNotReady), every
    node listed once."""
    Fleet(monkeypatch, HOSTS[:1])
    nodes = ironic.create_many(25, state="enroll")
    listing = listing_driver()._listing
    pages = listing._pages({"shard": ironic.shard, "fields": "uuid"}, 10, "full", [],
                           build=lambda raw: raw["uuid"])
    read = [next(pages) for _ in range(10)]
    for marker in read[-2:]:  # the marker and the node before it
        ironic.delete(marker)
    read += list(pages)
    assert len(read) == len(set(read)) == len(nodes), read
    assert set(read) == set(nodes)


def test_a_word_of_a_delete_is_checked_in_ironic_and_outlives_an_earlier_listing(
        real_ironic, ironic, monkeypatch):
    """Ironic's notification that a node was deleted (``NodeListing.deleted``) takes the
    node out of nova's cache at the next refresh, and nova's ``is_node_deleted`` (its
    orphan handling) says so; a word for a node Ironic still holds (forged, or stale)
    changes nothing; a whole listing that started before the word does not bring the
    node back, one that started after it is believed."""
    Fleet(monkeypatch, HOSTS[:1])
    driver = listing_driver()
    clock = [0.0]
    listing = driver._listing
    listing.clock = lambda: clock[0]
    listing._in_background = lambda work: work()

    def refresh():
        return set(refreshed(driver, ironic.shard))

    kept, deleted = ironic.create_many(2)
    assert refresh() == {kept, deleted}
    listed = list(driver.node_cache.values())

    def whole_listing(started):
        """A whole listing that started at ``started`` and held both nodes."""
        whole = node_listing.WholeListing(started)
        whole.nodes = listed
        return whole
    assert not listing.deleted(kept)  # Ironic holds it: the word is not believed
    ironic.delete(deleted)
    assert listing.deleted(deleted) and not listing.deleted(deleted)  # once
    assert refresh() == {kept}
    assert driver.is_node_deleted(deleted) and not driver.is_node_deleted(kept)
    listing._take(whole_listing(clock[0] - 1))  # started before the word: it stays out
    assert refresh() == {kept}
    clock[0] += 1
    listing._take(whole_listing(clock[0]))  # after it: the fleet is what it lists
    assert deleted in refresh()


def test_the_listener_of_deleted_nodes_never_holds_up_the_service_start(tmp_path):
    """oslo.messaging's listener waits for its bus at its start: with the bus down, the
    driver's listener of deleted nodes is started on a thread of its own, so
    nova-compute's ``init_host`` goes on at once, and its stop returns."""
    conf_file = tmp_path / "rp_reporter.conf"
    conf_file.write_text("[notifications]\ntransport_url = rabbit://guest:guest@127.0.0.1:"
                         f"{localstack.free_port()}/\n")
    began = time.monotonic()
    listener = deleted_nodes.listen(rp_conf.load(["--config-file", str(conf_file)]),
                                    "a-host", listing=None)
    assert listener is not None and time.monotonic() - began < 2
    assert listener.server is None  # still waiting for the bus
    listener.stop()
    assert deleted_nodes.listen(rp_conf.load([]), "a-host", listing=None) is None  # no bus


def test_update_provider_tree_matches_the_agents_model(real_ironic, ironic, monkeypatch):
    Fleet(monkeypatch, HOSTS[:1])
    kinds = [ironic.create(), ironic.create(maintenance=True), ironic.create(state="manageable"),
             ironic.create(traits=["CUSTOM_GPU", "HW_CPU_X86_AVX2"]),
             ironic.create(resource_class="Bare Metal.gold--XL"),
             ironic.create(state="active"), ironic.create(resource_class=None)]
    driver = Fleet.driver("ours")
    owned = Fleet.owned(driver, HOSTS[0], ironic={"shard": ironic.shard})
    assert set(kinds) - {kinds[5]} <= owned  # the active one is another service's instance
    for node in kinds:
        tree = nova_provider_tree.ProviderTree()
        tree.new_root(node, node)
        driver.update_provider_tree(tree, node)
        data = tree.data(node)
        desired = model.desired(model.node_from_api(ironic.get(node)))
        assert dict(data.inventory) == desired.inventories, node
        assert set(data.traits) == desired.traits, node


def test_a_node_changed_since_nova_cached_it_is_not_written_back(real_ironic, ironic,
                                                                 monkeypatch):
    """nova fills its node cache at the start of its periodic; a node that changed
    since (here: out of maintenance; in the nova-cloud race: freed by cleaning) must not
    be written back as cached over the agents' fresher content (seen: two freed nodes
    reserved again, the builds sent there found no host)."""
    Fleet(monkeypatch, HOSTS[:1])
    node = ironic.create(maintenance=True)
    driver = Fleet.driver("ours")
    assert node in Fleet.owned(driver, HOSTS[0], ironic={"shard": ironic.shard})
    tree = nova_provider_tree.ProviderTree()
    tree.new_root(node, node)
    driver.update_provider_tree(tree, node)  # a new provider, from the cache
    cached = dict(tree.data(node).inventory)
    assert [inv["reserved"] for inv in cached.values()] == [1]
    ironic.set_maintenance(node, False)  # after nova's cache was filled
    agents = {rc: dict(inv, reserved=0) for rc, inv in cached.items()}
    tree.update_inventory(node, agents)  # what the agents wrote, as Placement holds it
    driver.update_provider_tree(tree, node)
    assert dict(tree.data(node).inventory) == agents  # not the cached reserved=1
    assert driver.node_cache[node].is_maintenance is False  # the cache took the read


def test_traits_follow_the_node_and_a_class_change_keeps_the_old_class(real_ironic, ironic,
                                                                       monkeypatch):
    fleet_ = Fleet(monkeypatch, HOSTS[:1])
    node = ironic.create(traits=["CUSTOM_A", "CUSTOM_B"], state="available")
    driver = Fleet.driver("ours")
    assert node in Fleet.owned(driver, HOSTS[0], ironic={"shard": ironic.shard})
    tree = nova_provider_tree.ProviderTree()
    tree.new_root(node, node)
    tree.update_traits(node, [model.MANAGED_TRAIT, "CUSTOM_RPR_ADDED_CUSTOM_A"])  # the agent's
    driver.update_provider_tree(tree, node)
    tree.add_traits(node, "COMPUTE_STATUS_DISABLED", "OWNER_NOVA", "CUSTOM_OPERATOR")
    ironic.set_traits(node, ["CUSTOM_A"])
    instance = str(uuid.uuid4())
    ironic.patch(node, instance_uuid=instance, resource_class="baremetal-silver")
    fleet_.instances[HOSTS[0]].add(instance)
    assert node in Fleet.owned(driver, HOSTS[0], ironic={"shard": ironic.shard})
    driver.update_provider_tree(tree, node)
    data = tree.data(node)
    assert set(data.traits) == {"CUSTOM_A", "COMPUTE_STATUS_DISABLED", "OWNER_NOVA",
                                model.MANAGED_TRAIT}
    assert set(data.inventory) == {"CUSTOM_BAREMETAL_GOLD", "CUSTOM_BAREMETAL_SILVER"}
    assert data.inventory["CUSTOM_BAREMETAL_GOLD"]["reserved"] == 1
    # The class cleared while the instance is there: the allocated class stays, reserved;
    # once the instance is gone, the inventory goes (nova would raise NoResourceClass).
    ironic.patch(node, resource_class=None)
    driver.update_provider_tree(tree, node)
    assert {rc: inv["reserved"] for rc, inv in tree.data(node).inventory.items()} == {
        "CUSTOM_BAREMETAL_GOLD": 1, "CUSTOM_BAREMETAL_SILVER": 1}
    ironic.patch(node, instance_uuid=None)
    fleet_.instances[HOSTS[0]].clear()
    assert node in Fleet.owned(driver, HOSTS[0], ironic={"shard": ironic.shard})
    driver.update_provider_tree(tree, node)
    assert dict(tree.data(node).inventory) == {}


class Lapsing:
    """A live membership of ``members`` whose lease lapses when the test says."""

    fenced, lapses = False, 0

    def __init__(self, members):
        self._members = members

    def members(self):
        return set(self._members)


def test_a_service_whose_lease_lapsed_says_it_is_a_ring_member_again(nova_config, caplog):
    """Paused past its lease (SIGSTOP), a service sees the members it saw before once it
    runs again; under eventlet (nova 31 to 33) its renewal ran before nova's next
    refresh, so the ring was the same and nothing said it was a member again."""
    CONF.set_override("peers_from", "coordination", group="rp_reporter")
    CONF.set_override("host", HOSTS[0])
    try:
        ring = Fleet.driver("ours")._coordinated_ring()
        ring.membership = Lapsing(HOSTS[:2])
        with caplog.at_level("INFO"):
            ring.refresh_ring()
            ring.refresh_ring()  # nothing changed: nothing said
            ring.membership.lapses += 1  # the pause: a renewal after the deadline
            ring.refresh_ring()
            ring.refresh_ring()
    finally:
        CONF.clear_override("peers_from", group="rp_reporter")
    said = [r.getMessage() for r in caplog.records if "ring members now" in r.getMessage()]
    assert said == [f"rp_reporter ring members now {sorted(HOSTS[:2])}",
                    f"rp_reporter ring members now {sorted(HOSTS[:2])} (a live member "
                    "again: its lease had lapsed)"]


def test_a_renewal_that_starts_late_is_counted_and_past_a_third_of_the_lease_logged(
        nova_config, caplog):
    """nova's work holding the process (under eventlet, a stretch that never yields)
    delays the membership renewals: each one's lateness goes into the driver's
    histogram, and one later than a third of the lease is logged."""
    CONF.set_override("peers_from", "coordination", group="rp_reporter")
    try:
        driver = Fleet.driver("ours")
        ring = driver._coordinated_ring()
        with caplog.at_level("WARNING"):
            ring._renewal_started(0.2, lease=10)
            ring._renewal_started(3.5, lease=10)
    finally:
        CONF.clear_override("peers_from", group="rp_reporter")
    histogram = "rp_reporter_membership_renewal_late_seconds"
    assert driver._metrics.registry.get_sample_value(f"{histogram}_count") == 2
    assert driver._metrics.registry.get_sample_value(f"{histogram}_bucket", {"le": "3.0"}) == 1
    late = [r.getMessage() for r in caplog.records if "renewal started" in r.getMessage()]
    assert late == ["membership renewal started 3.5 s late (lease 10 s): nova's work held "
                    "the process meanwhile"]
    assert nova_scale.LATE_RENEWAL.search(late[0]).group(1) == "3.5"  # the bench reads it
