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

"""``[rp_reporter] full_pass_every`` in nova's own code: which nodes nova's resource-tracker
periodic goes over, and what a build that asks the driver for "this host's node" gets.

The periodic is nova's real ``ComputeManager.update_available_resource`` (its database
read of the compute node records stubbed), with a resource tracker that does what nova's
does with the driver: ``get_available_resource(node)`` for each node it was given.  A
build's question is nova's real ``ComputeManager._get_nodename``.
"""

import datetime
import logging
import threading
import types
import uuid

import pytest
from nova import context as nova_context
from nova import objects
from nova.compute import manager as nova_manager
from nova.compute import resource_tracker as nova_resource_tracker
from openstack.baremetal.v1 import node as sdk_node
from oslo_service import periodic_task as oslo_periodic_task

from rp_reporter.nova_compute import node_listing
from rp_reporter.nova_compute import periodic
from tests.nova.in_process.test_driver import CONF
from tests.nova.in_process.test_driver import HOSTS
from tests.nova.in_process.test_driver import FakeConnection
from tests.nova.in_process.test_driver import Fleet
from tests.nova.in_process.test_driver import nova_config  # noqa: F401 - a fixture

EVERY = 4  # full_pass_every
INTERVAL = 60  # update_resources_interval, s
PERIODIC_LOG = "rp_reporter.nova_compute.periodic"
PROPERTIES = {"cpu_arch": "x86_64"}
TASK = "nova.compute.manager.ComputeManager.update_available_resource"


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


class ResourceTracker:
    """What nova's resource tracker does with the driver in a periodic: its look at each
    node it is given (``get_available_resource``)."""

    def __init__(self, driver):
        self.driver = driver
        self.looked_at = []

    def clean_compute_node_cache(self, compute_nodes):
        pass

    def update_available_resource(self, context, nodename, startup=False):
        self.driver.get_available_resource(nodename)
        self.looked_at.append(nodename)


class Service:
    """One nova-compute: nova's ComputeManager over our driver, a node listing, a clock."""

    def __init__(self, monkeypatch, count=5):
        Fleet(monkeypatch, HOSTS[:1])
        self.nodes = [sdk_node.Node(id=str(uuid.uuid4()), instance_id=None,
                                    provision_state="available", properties=PROPERTIES)
                      for _ in range(count)]
        self.connection = FakeConnection(self.nodes)
        self.driver = Fleet.driver("ours", self.connection)
        self.clock = Clock()
        self.driver._periodic.clock = self.clock
        if self.driver._listing is not None:  # full_pass_every above 1
            self.driver._listing.clock = self.clock
            # a whole listing due runs at once (one test below runs it on its thread)
            self.driver._listing._in_background = lambda work: work()
        self.manager = nova_manager.ComputeManager.__new__(nova_manager.ComputeManager)
        self.manager.host = HOSTS[0]
        self.manager.driver = self.driver
        self.manager.rt = ResourceTracker(self.driver)
        monkeypatch.setattr(self.manager, "_get_compute_nodes_in_db",
                            lambda *args, **kwargs: [], raising=False)
        self.context = nova_context.get_admin_context()

    def periodic(self, after=INTERVAL, startup=False):
        """The next periodic (``startup``: nova's update at the service's start),
        ``after`` seconds on: the nodes nova looked at."""
        self.clock.now += after
        self.manager.rt.looked_at = []
        self.manager.update_available_resource(self.context, startup=startup)
        return set(self.manager.rt.looked_at)

    def nodename(self):
        """A build's "this host's node" (nova's anti-affinity check, among others)."""
        instance = objects.Instance(uuid=str(uuid.uuid4()))
        return nova_manager.ComputeManager._get_nodename(self.manager, instance)

    def ids(self, *indexes):
        return {self.nodes[i].id for i in indexes}

    @property
    def every(self):
        return {n.id for n in self.nodes}


@pytest.fixture
def service(nova_config, monkeypatch):  # noqa: F811 - the fixture imported above
    CONF.set_override("host", HOSTS[0])
    CONF.set_override("update_resources_interval", INTERVAL)
    CONF.set_override("full_pass_every", EVERY, group="rp_reporter")
    try:
        yield Service(monkeypatch)
    finally:
        CONF.clear_override("full_pass_every", group="rp_reporter")
        CONF.clear_override("update_resources_interval")
        CONF.clear_override("host")


def test_a_build_after_quiet_periodics_gets_a_node_and_changes_nothing(service):
    """A hard anti-affinity group's check asks nova's ``_get_nodename``, which takes
    ``get_available_nodes()[0]``: never an empty answer, and the question changes
    nothing."""
    assert service.periodic() == service.every  # the start: every node
    service.periodic()
    service.periodic()  # two quiet periodics
    assert service.nodename() in service.every
    assert service.driver.get_available_nodes()[0] in service.every
    service.nodes[1].is_maintenance = True  # changed in Ironic: due at the next periodic
    answers = [service.driver.get_available_nodes() for _ in range(3)]
    names = {service.nodename() for _ in range(3)}
    assert answers[0] == answers[1] == answers[2] and answers[0] == [service.nodes[1].id]
    assert names == {service.nodes[1].id}
    assert service.periodic() == service.ids(1)  # the builds marked nothing as looked at


def test_a_quiet_periodic_goes_over_the_node_nova_looked_at_least_recently(service):
    service.periodic()
    first = service.periodic(after=INTERVAL)
    second = service.periodic(after=INTERVAL)
    assert len(first) == len(second) == 1 and first != second
    assert service.driver.get_available_nodes() not in ([], list(first), list(second))


def test_every_node_is_due_once_nova_has_not_looked_at_it_for_n_intervals(service):
    assert service.periodic() == service.every
    quiet = [service.periodic() for _ in range(EVERY - 1)]  # one node each: see above
    # The Nth interval since the start: the nodes nova has not looked at since, due.
    assert service.periodic() == service.every - set().union(*quiet)
    # However many builds ask meanwhile: the clock decides, not the count of questions.
    for _ in range(10):
        service.driver.get_available_nodes()
    assert service.periodic() == quiet[0]  # looked at N intervals ago
    # A periodic late by up to half an interval, or a look late in its periodic, is still
    # due N periodics on.
    assert service.periodic(after=INTERVAL * 1.4) == quiet[1]
    assert service.periodic(after=INTERVAL * 0.6) == quiet[2]


def test_a_node_the_driver_cleaned_up_after_a_failed_spawn_is_due(service, monkeypatch):
    # nova's failed_spawn_cleanup reads the node and cleans up what the deploy left.
    monkeypatch.setattr(service.driver, "_validate_instance_and_node", lambda instance: None)
    monkeypatch.setattr(service.driver, "_cleanup_deploy", lambda node, instance: None)
    service.periodic()
    quiet = service.periodic()
    (node,) = quiet  # the node looked at most recently: not the next quiet periodic's
    instance = objects.Instance(uuid=str(uuid.uuid4()), node=node)
    service.driver.failed_spawn_cleanup(instance)
    # nova counts the failed build (failed_builds, BuildFailureWeigher) after its cleanup
    # and writes it at the node's next update: due at the next two periodics.
    assert node in service.periodic()
    assert node in service.periodic()
    assert node not in service.periodic()


def test_a_node_released_and_taken_back_is_due(service):
    service.periodic()
    service.periodic()
    node = service.nodes[2].id
    service.driver._periodic.forget({node})
    assert service.periodic() == {node}


def test_a_node_gone_from_the_service_and_back_is_due(service):
    service.periodic()
    gone = service.nodes[3]
    gone.instance_id = str(uuid.uuid4())  # a server of another service's on it
    service.periodic()
    assert gone.id not in service.driver.node_cache
    gone.instance_id = None
    assert service.periodic() == {gone.id}


def test_one_line_per_periodic_none_for_a_build(service, caplog):
    caplog.set_level(logging.INFO, logger=PERIODIC_LOG)
    service.periodic()
    service.periodic()
    for _ in range(5):
        service.nodename()
        service.driver.get_available_nodes()
    lines = [r.getMessage() for r in caplog.records if r.name == PERIODIC_LOG]
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"resource tracker periodic: every node, {len(service.every)}")
    assert lines[1].startswith(f"resource tracker periodic: 1 of {len(service.every)} nodes")


def test_one_is_novas_behaviour(nova_config, monkeypatch, caplog):  # noqa: F811
    caplog.set_level(logging.INFO, logger=PERIODIC_LOG)
    CONF.set_override("host", HOSTS[0])
    try:
        service = Service(monkeypatch)
        for _ in range(3):
            assert service.periodic() == service.every
            assert service.driver.get_available_nodes() == list(service.driver.node_cache)
    finally:
        CONF.clear_override("host")
    assert not [r for r in caplog.records if r.name == PERIODIC_LOG]


class RealTracker(nova_resource_tracker.ResourceTracker):
    """nova's resource tracker with its own ``_init_compute_node`` and ``disabled`` (the
    database reads stubbed by the test), and the look at each node it is given of
    ``ResourceTracker`` above."""

    def __init__(self, driver):
        super().__init__(HOSTS[0], driver, reportclient=object())  # no Placement here
        self.looked_at = []

    clean_compute_node_cache = ResourceTracker.clean_compute_node_cache
    update_available_resource = ResourceTracker.update_available_resource


def test_at_the_start_a_free_node_with_its_record_here_is_taken_up_not_updated(
        service, monkeypatch, caplog):
    """nova's start (``pre_start_hook``: ``update_available_resource(startup=True)``)
    with the compute node records in place: a free node whose record is this host's
    goes into nova's resource tracker as nova's update starts with it (nova's own
    ``_init_compute_node``: a claim on it is possible at once), and nova's start-up update
    goes over the others only: a node with a server of this host's, a node with no
    record, a node whose record another host holds.  The nodes taken up are due at the
    first periodic, as new here; no orphan warning, no record touched."""
    caplog.set_level(logging.INFO, logger=PERIODIC_LOG)
    nodes = service.nodes
    server = str(uuid.uuid4())
    nodes[3].instance_id = server
    monkeypatch.setattr(objects.InstanceList, "get_uuids_by_host",
                        lambda ctxt, host: [server] if host == HOSTS[0] else [])
    records = {node.id: objects.ComputeNode(
        id=i, uuid=node.id, hypervisor_hostname=node.id, deleted=False, service_id=7,
        host=HOSTS[0] if i != 4 else "another-host") for i, node in enumerate(nodes) if i != 2}
    monkeypatch.setattr(objects.ComputeNodeList, "get_all_by_host", lambda ctxt, host: [
        cn for cn in records.values() if cn.host == host])
    monkeypatch.setattr(nova_resource_tracker.ResourceTracker, "_get_compute_node",
                        lambda *args: pytest.fail("a database read per node"))
    monkeypatch.setattr(objects.PciDeviceList, "get_by_compute_node",
                        lambda ctxt, node_id: objects.PciDeviceList(objects=[]))
    rt = RealTracker(service.driver)
    rt.set_service_ref(objects.Service(id=7, host=HOSTS[0]))  # nova's pre_start_hook
    service.manager.rt = rt
    service.driver.virtapi = types.SimpleNamespace(_compute=service.manager)
    monkeypatch.setattr(service.manager, "_get_compute_nodes_in_db",
                        lambda *args, **kwargs: [cn for cn in records.values()
                                                 if cn.host == HOSTS[0]])
    started = service.periodic(startup=True)
    assert started == service.ids(2, 3, 4)  # no record, a server, another host's record
    taken = service.ids(0, 1)
    assert set(rt.compute_nodes) == taken and not any(map(rt.disabled, taken))
    assert all(rt.compute_nodes[node] is records[node] for node in taken)
    assert "2 of 5 nodes taken up with their compute node records here" in caplog.text
    assert "Found orphan compute node" not in caplog.text
    assert service.periodic() == taken  # nova's update of each, as new here
    assert len(service.periodic()) == 1  # then the one node, as ever


def test_a_node_nova_fails_to_take_up_at_the_start_goes_through_its_update(
        service, monkeypatch):
    """nova's ``_init_compute_node`` raising for one node: that node is left out of the
    resource tracker, as nova's would be, and goes through nova's start-up update."""
    records = {node.id: objects.ComputeNode(id=i, uuid=node.id, hypervisor_hostname=node.id,
                                            deleted=False, service_id=7, host=HOSTS[0])
               for i, node in enumerate(service.nodes)}
    monkeypatch.setattr(objects.ComputeNodeList, "get_all_by_host",
                        lambda ctxt, host: list(records.values()))
    monkeypatch.setattr(objects.PciDeviceList, "get_by_compute_node",
                        lambda ctxt, node_id: objects.PciDeviceList(objects=[]))
    init = nova_resource_tracker.ResourceTracker._init_compute_node
    failing = service.nodes[1].id

    def fails_for_one(self, context, resources):
        if resources["hypervisor_hostname"] == failing:
            raise ValueError("a record nova cannot take")
        return init(self, context, resources)
    monkeypatch.setattr(nova_resource_tracker.ResourceTracker, "_init_compute_node",
                        fails_for_one)
    rt = service.manager.rt = RealTracker(service.driver)
    rt.set_service_ref(objects.Service(id=7, host=HOSTS[0]))
    service.driver.virtapi = types.SimpleNamespace(_compute=service.manager)
    assert service.periodic(startup=True) == {failing}
    assert set(rt.compute_nodes) == service.every - {failing}


def test_at_the_start_records_that_cannot_be_read_leave_every_node_to_nova(
        service, monkeypatch, caplog):
    """nova-conductor not answering at the start: nova's start-up update goes over every
    node, as without the take-up, and the service starts."""
    def conductor_down(ctxt, host):
        raise TimeoutError("MessagingTimeout: no reply from nova-conductor")
    monkeypatch.setattr(objects.ComputeNodeList, "get_all_by_host", conductor_down)
    service.driver.virtapi = types.SimpleNamespace(_compute=service.manager)
    assert service.periodic(startup=True) == service.every
    assert "compute node records could not be read" in caplog.text


def test_novas_orphan_check_and_failure_lines(service, monkeypatch, caplog):
    """nova's orphan check and failure lines, through nova's and oslo.service's own
    loggers; init_host's view."""
    nodes, driver = service.nodes, service.driver
    assert service.periodic() == service.every
    service.periodic()
    nodes[0].is_maintenance = True  # a field nova reads changed
    new = sdk_node.Node(id=str(uuid.uuid4()), instance_id=None, properties=PROPERTIES)
    service.connection.listing.append(new)  # a node new here
    assert service.periodic() == {nodes[0].id, new.id}
    assert set(driver.get_nodenames_by_uuid()) == service.every  # init_host's: every node

    # nova's orphan check for a node left out: answered from the listing, no read.
    def no_read(node_id):
        raise AssertionError(f"read {node_id}")
    monkeypatch.setattr(driver, "_get_node", no_read)
    left_out = next(iter(service.every - set(driver.get_available_nodes())))
    assert driver.is_node_deleted(left_out) is False
    # nova's orphan warning: dropped for the nodes left out on purpose, kept for others.
    other = str(uuid.uuid4())
    for node in (left_out, other):
        nova_manager.LOG.warning(
            "Found orphan compute node %(id)s hypervisor host is %(hh)s, nodes are "
            "%(nodes)s. We are not deleting this as the driver says this node has not "
            "been deleted.", {"id": 1, "hh": node, "nodes": set()})
    warned = " ".join(r.getMessage() for r in caplog.records if r.name == "nova.compute.manager")
    assert other in warned and left_out not in warned

    # A node whose update failed is due again at the next periodic (nova would go over
    # it again); after a failed periodic, every node that periodic was given.
    nova_manager.LOG.exception("Error updating resources for node %(node)s.",
                               {"node": nodes[2].id})
    assert service.periodic(after=1) == service.ids(2)
    oslo_periodic_task.LOG.exception("Error during %(full_task_name)s",
                                     {"full_task_name": TASK})
    assert service.periodic(after=1) == service.ids(2)
    caplog.clear()  # a failed periodic: its nodes due again, and one line says so
    caplog.set_level(logging.INFO, logger=PERIODIC_LOG)
    oslo_periodic_task.LOG.exception("Error during %(full_task_name)s",
                                     {"full_task_name": TASK})
    assert "1 nodes due again" in caplog.text


class IronicDown(Exception):
    @classmethod
    def read(cls, *args):
        raise cls()


@pytest.mark.parametrize("operation", ["spawn", "destroy"])
def test_a_node_the_driver_spawned_on_or_destroyed_on_is_due(service, operation,
                                                             monkeypatch):
    """Whether nova's operation succeeds or fails (here it fails at its first read of the
    node)."""
    service.periodic()
    quiet = service.periodic()
    (node,) = quiet  # the node looked at most recently: not the next quiet periodic's
    instance = objects.Instance(uuid=str(uuid.uuid4()), node=node)
    args = {"spawn": (None, instance, None, [], None, {}),
            "destroy": (None, instance, None)}[operation]
    for read in ("_get_node", "_validate_instance_and_node"):
        monkeypatch.setattr(service.driver, read, IronicDown.read)
    with pytest.raises(IronicDown):
        getattr(service.driver, operation)(*args)
    assert node in service.periodic()


def requests(service, kinds=("full", "changes")):
    """Ironic node list requests so far of nova's node refreshes, by listing (check: the
    reads before nova's periodic looks at a node no listing held for it)."""
    counter = service.driver._metrics.node_list_requests
    return {kind: counter.labels(kind)._value.get() for kind in kinds}


def test_the_fleet_is_listed_whole_once_a_full_pass_and_otherwise_where_it_changed(service):
    """nova's node refresh (each periodic's, each build's) lists the whole fleet at the
    start and once a full pass; between them, the nodes written since (two short sorted
    requests), and nova's cache still holds every field nova reads as Ironic has it."""
    assert service.periodic() == service.every
    assert requests(service) == {"full": 1, "changes": 0}
    service.nodes[0].properties = {"cpu_arch": "aarch64"}  # written in Ironic
    new = sdk_node.Node(id=str(uuid.uuid4()), instance_id=None, properties=PROPERTIES)
    service.connection.listing.append(new)  # created in Ironic
    assert service.periodic() == {service.nodes[0].id, new.id}
    assert service.driver.node_cache[service.nodes[0].id].properties["cpu_arch"] == "aarch64"
    service.nodename()  # a build's question refreshes too
    assert requests(service) == {"full": 1, "changes": 4}
    # A node deleted from Ironic: no listing of what changed sees it go, and nova's
    # periodic never looks at it (its look would write its provider again): a node due
    # that the periodic's listing did not hold is checked in Ironic first.
    deleted = service.connection.listing.pop(1)
    looked = service.periodic()
    while requests(service)["full"] == 1:
        looked |= service.periodic()
    assert deleted.id not in service.driver.node_cache and deleted.id not in looked
    assert set(service.driver.node_cache) == service.every  # the listing: deleted gone
    assert service.clock.now - 1000 >= service.driver._periodic.passes.longest_s


def test_a_whole_listing_due_runs_beside_novas_periodic_which_does_not_wait(service):
    """A whole listing due (a full pass on) runs on a thread of its own: the periodic it
    falls due in lists what changed and goes on, and looks at no node for its age (only
    the whole listing would see it deleted); the refresh that finds it done takes its
    fleet, then what was written since it started."""
    service.driver._listing._in_background = node_listing.in_a_thread
    service.periodic()
    pages, go_on = threading.Event(), threading.Event()
    get = service.connection.get

    def whole_listing_waits(url, params, **kwargs):
        if params.get("fields", "uuid") != "uuid":  # a page of the whole listing
            pages.set()
            assert go_on.wait(30)
        return get(url, params, **kwargs)
    service.connection.get = whole_listing_waits
    deleted = service.connection.listing.pop(1)
    longest = service.driver._periodic.passes.longest_s
    quiet = service.periodic(after=longest)  # every node aged; none listed since
    assert len(quiet) == 1 and deleted.id not in quiet  # nova's one node, read first
    assert pages.wait(30) and requests(service) == {"full": 1, "changes": 2}
    service.nodes[2].is_maintenance = True  # written while the whole listing runs
    go_on.set()
    whole = service.driver._listing._whole
    assert whole is not None and whole.done.wait(30)
    looked = service.periodic()
    assert requests(service) == {"full": 2, "changes": 4}
    assert deleted.id not in service.driver.node_cache and deleted.id not in looked
    assert service.driver.node_cache[service.nodes[2].id].is_maintenance
    # the aged nodes (listed since nova's looks), and the node written meanwhile
    assert looked == (service.every - quiet) | {service.nodes[2].id}


def test_a_whole_listing_that_fails_is_made_again_after_a_backoff_and_alerts(service, caplog):
    """Ironic failing the whole listings made beside nova's periodic: one line says so
    each time, nova's refreshes go on from the fleet kept and what changed, the next
    whole listing starts RETRY_S after the failure is found, doubled at each failure in
    a row, and from ``listing_failures_alert`` (3) in a row the driver's alert metric is
    1, until one is taken."""
    listing = service.driver._listing
    listing._in_background = node_listing.in_a_thread
    service.periodic()
    get = service.connection.get
    failures, fail, go_on = [True] * 3, threading.Semaphore(0), threading.Event()

    def failing(url, params, **kwargs):
        if params.get("fields", "uuid") != "uuid":  # a page of a whole listing
            if failures:  # each failure when the test says
                failures.pop()
                assert fail.acquire(timeout=30)
                raise IronicDown("503 Service Unavailable")
            assert go_on.wait(30)
        return get(url, params, **kwargs)
    service.connection.get = failing
    alert = service.driver._metrics.whole_listing_failing
    service.periodic(after=service.driver._periodic.passes.longest_s)  # one due
    for in_a_row in (1, 2, 3):
        failed = listing._whole
        assert failed is not None
        fail.release()
        assert failed.done.wait(30) and failed.nodes is None
        service.nodes[in_a_row].is_maintenance = True
        # the refresh that finds it failed goes on from the fleet kept, starting none
        assert service.periodic(after=1) == service.ids(in_a_row)
        assert listing._whole is None and listing.failures == in_a_row
        assert alert._value.get() == (1 if in_a_row >= 3 else 0)
        backoff = node_listing.RETRY_S * 2 ** (in_a_row - 1)
        service.periodic(after=backoff - 1.5)
        assert listing._whole is None  # not before the backoff
        service.periodic(after=1.5)
    assert caplog.text.count("The whole listing of the fleet beside nova's periodic "
                             "failed") == 3
    again = listing._whole
    assert again is not None and again is not failed
    go_on.set()
    assert again.done.wait(30)
    service.periodic()
    assert listing.failures == 0 and alert._value.get() == 0
    assert requests(service)["full"] == 2  # pages answered: the start's, the one taken


def test_every_listing_reads_past_pages_ironic_cut_to_its_max_limit(service):
    """Ironic cuts each page to its ``[api] max_limit`` (here 2, below every page the
    driver asks) and links the next: the whole listing and the listing of what changed
    read on to the end, and nova's cache holds every node."""
    service.connection.max_limit = 2
    assert service.periodic() == service.every  # five nodes, pages of 2, 2 and 1
    assert set(service.driver.node_cache) == service.every
    assert requests(service) == {"full": 3, "changes": 0}
    for i in (0, 1, 2):
        service.nodes[i].is_maintenance = True
    assert service.periodic() == service.ids(0, 1, 2)  # the written ones, over 2 pages
    assert all(service.driver.node_cache[n].is_maintenance for n in service.ids(0, 1, 2))


def test_where_what_changed_costs_more_than_the_whole_fleet_the_fleet_is_listed_whole(
        service, caplog):
    """The listing of what changed asks every field of each node (Ironic's list carries
    the time stamps only then); during a mass deploy or cleaning it can cost more than
    the whole fleet's listing of nova's fields.  Past its first pages, once its answers
    come to more bytes than the latest whole listing's, the refresh lists the whole fleet
    instead; a few nodes written are listed as before."""
    caplog.set_level(logging.INFO, logger="rp_reporter.nova_compute.node_listing")
    service.connection.max_limit = 2  # pages of 2: the whole listing is 3 pages
    enrolled = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)
    for node in service.nodes:
        node.created_at = enrolled.isoformat()  # before the listings' slack
    service.periodic()
    service.nodes[0].is_maintenance = True
    assert service.periodic() == service.ids(0)
    assert requests(service) == {"full": 3, "changes": 2}  # one page of each order
    for node in service.nodes:
        node.is_maintenance = not node.is_maintenance  # a mass operation
    assert service.periodic() == service.every
    assert requests(service) == {"full": 6, "changes": 3}
    assert "the whole fleet listed instead" in caplog.text
    assert all(service.driver.node_cache[n.id].is_maintenance == n.is_maintenance
               for n in service.nodes)
    # the next refresh lists the whole fleet at once (the mass operation goes on)...
    service.nodes[1].is_maintenance = not service.nodes[1].is_maintenance
    assert service.periodic() == service.ids(1)
    assert requests(service) == {"full": 9, "changes": 3}
    # ... and the one after tries what changed again: a few nodes (the mass operation's
    # writes older than the listings' slack by then), listed as before
    for node in service.nodes:
        node.updated_at = enrolled.isoformat()
    service.nodes[2].is_maintenance = not service.nodes[2].is_maintenance
    assert service.periodic() == service.ids(2)
    assert requests(service) == {"full": 9, "changes": 5}


def test_a_node_deleted_after_the_whole_listing_read_it_never_reaches_novas_look(service):
    """A node deleted from Ironic after the latest whole listing read it stays in the
    fleet kept until the next one; nova's periodic would look at it when it falls due
    for its age (and write its provider again).  Every node due that the periodic's
    listing did not hold is checked in Ironic first: the deleted one leaves nova's cache
    then, unlooked at, and nova's orphan handling takes its record."""
    assert service.periodic() == service.every
    service.nodes[4].is_maintenance = True  # looked at one periodic later than the rest
    assert service.periodic() == service.ids(4)
    longest = service.driver._periodic.passes.longest_s
    looked = service.periodic(after=longest - INTERVAL)  # a whole listing, all aged but 4
    assert looked == service.every - service.ids(4)
    assert requests(service)["full"] == 2
    deleted = service.nodes[4]
    service.connection.listing.remove(deleted)  # after the whole listing read it
    assert deleted.id in service.driver.node_cache
    looked = service.periodic()  # 4 due for its age
    assert deleted.id not in looked and deleted.id not in service.driver.node_cache
    assert requests(service)["full"] == 2 and requests(service, ["check"])["check"] >= 1
    assert not service.driver._periodic.known_to_exist(deleted.id)  # nova's orphan read


def test_no_node_deleted_after_the_whole_listing_is_handed_to_nova_in_place_of_one(
        service, caplog):
    """Where every node due is gone from Ironic, nova is still given one node (its
    periodic and a build take the answer's first as "this host's node"): the one it
    looked at least recently, checked in Ironic first like the due ones, so a node
    deleted meanwhile is never the one handed over; where Ironic does not answer, only a
    node the periodic's own listing held is, else none."""
    assert service.periodic() == service.every
    service.nodes[4].is_maintenance = True  # looked at one periodic later than the rest
    assert service.periodic() == service.ids(4)
    longest = service.driver._periodic.passes.longest_s
    assert service.periodic(after=longest - INTERVAL) == service.every - service.ids(4)
    kept = service.ids(2, 3)
    deleted = [service.nodes[i] for i in (4, 0, 1)]  # 4 due; 0 and 1 looked at least recently
    for node in deleted:
        service.connection.listing.remove(node)  # (the test's nodes) after the listing read them
    looked = service.periodic()
    assert not looked & {node.id for node in deleted}, looked
    assert looked <= kept and len(looked) == 1
    assert deleted[0].id not in service.driver.node_cache  # the due one, checked


def test_where_ironic_does_not_answer_only_a_node_known_to_exist_is_handed_to_nova():
    """The node due waits (Ironic does not answer for it); the one nova would be given
    in its place goes only where the periodic's own listing held it."""
    passes = periodic.PeriodicNodes(full_pass_every=EVERY, interval_s=INTERVAL)
    clock = [0.0]
    passes.clock = lambda: clock[0]
    nodes = {name: sdk_node.Node(id=name, instance_id=None, provision_state="available",
                                 properties=PROPERTIES) for name in ("due", "other")}
    held = lambda uuids: set(uuids)  # noqa: E731 - Ironic holds both
    for name in passes.for_periodic(list(nodes), dict(nodes), in_scope=held,
                                    seen=(0.0, dict.fromkeys(nodes, 0.0))):
        passes.looked_at(name, lambda name=name: nodes[name])
    clock[0] = passes.passes.longest_s - INTERVAL
    passes.looked_at("other", lambda: nodes["other"])  # "due" is due for its age next
    clock[0] += INTERVAL
    down = lambda uuids: None  # noqa: E731
    unheld = (clock[0], dict.fromkeys(nodes, 0.0))  # the periodic's listing held neither
    assert passes.for_periodic(list(nodes), dict(nodes), in_scope=down, seen=unheld) == []
    listed = (clock[0], {"due": 0.0, "other": clock[0]})  # it held "other"
    assert passes.for_periodic(list(nodes), dict(nodes), in_scope=down,
                               seen=listed) == ["other"]
    # At the service's start with every node due taken up, one is still given, checked.
    clock[0] += passes.passes.longest_s
    assert passes.for_periodic(list(nodes), dict(nodes), in_scope=held, seen=unheld,
                               take_up=lambda free: free) in (["due"], ["other"])


def test_a_defect_in_the_listing_of_changes_falls_back_to_novas_own_listing(service, caplog):
    """A listing of what changed that raises (not Ironic failing: nova's own answer to
    that stays VirtDriverNotReady) leaves nova its own listing of the whole fleet, and
    the next refresh lists the whole fleet again."""
    service.periodic()

    def broken(*args):
        raise TypeError("can't compare offset-naive and offset-aware datetimes")
    service.driver._listing.view.took_changes = broken
    service.nodes[2].is_maintenance = True
    assert service.periodic() == service.ids(2)  # from nova's own listing
    assert "nova's own listing of the whole fleet instead" in caplog.text
    service.periodic()
    assert requests(service)["full"] == 2
