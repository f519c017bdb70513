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

"""The driver in a real nova-compute, started by its own command with its own
nova.conf, as distributions and deployment tools start it.

nova-compute pings nova-conductor before it loads its driver, so a real
nova-conductor runs beside it (its databases on sqlite, cell_v2 set up by
nova-manage).  nova-compute then loads ``compute_driver = rp_reporter.IronicDriver``
through nova's own loader, and its resource tracker reports this test's Ironic
nodes to the real Placement through our ``update_provider_tree``.
"""

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from tools import clients
from tools.localstack import ironic as ironic_service
from tools.localstack import releases
from tools.wait import wait_for

pytestmark = pytest.mark.functional
BIN = os.path.dirname(sys.executable)  # nova's commands, in nova's environment


def ini(sections):
    return "".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) + "\n"
                   for name, values in sections.items())


def run(bin_dir, *argv, conf):
    result = subprocess.run([os.path.join(bin_dir, argv[0]), "--config-file", conf, *argv[1:]],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{argv}: {result.stdout}{result.stderr}"


@pytest.fixture
def nova_bin():
    """Where nova's commands are: nova's environment, the tests' own by default."""
    return BIN


@pytest.fixture
def nova_compute(request, stack, shard, tmp_path, nova_bin):
    """Start nova-conductor and nova-compute (our driver, with the test's ``[rp_reporter]``
    options from ``@pytest.mark.parametrize("nova_compute", [{...}], indirect=True)``, and
    nova's debug lines where they hold ``"debug": True``, its update_resources_interval
    ``"interval"``, 10 s by default, ``"ironic"``: more ``[ironic]`` options,
    ``"notifications"``: a ``config_file`` naming the stack's bus, which Ironic's
    notifications arrive on); yield them (``NovaServices``)."""
    options = dict(getattr(request, "param", {}))
    if options.pop("notifications", False):
        reporter_conf = tmp_path / "rp_reporter.conf"
        reporter_conf.write_text(ini({"notifications": {"transport_url": stack.transport_url}}))
        options["config_file"] = reporter_conf
    debug = str(options.pop("debug", False)).lower()
    interval = options.pop("interval", 10)
    ironic_options = options.pop("ironic", {})
    common = {
        # graceful_shutdown_timeout: SIGTERM stops each service within 5 s (nova 33 took
        # the default 60 s, then the test's 30 s wait and a SIGKILL, at every teardown).
        "DEFAULT": {"transport_url": stack.transport_url, "state_path": tmp_path / "state",
                    "host": "rp-compute-1", "debug": debug, "graceful_shutdown_timeout": 5},
        "oslo_concurrency": {"lock_path": tmp_path / "locks"},
        "placement": {"auth_type": "admin_token", "endpoint": stack.placement_url,
                      "token": "admin"},
    }
    conductor_conf, compute_conf = tmp_path / "conductor.conf", tmp_path / "compute.conf"
    conductor_conf.write_text(ini({
        **common,
        "api_database": {"connection": f"sqlite:///{tmp_path}/nova_api.db"},
        "database": {"connection": f"sqlite:///{tmp_path}/nova.db"},
    }))
    # nova-compute has no database: it reaches one through nova-conductor.
    compute_conf.write_text(ini({
        **common,
        # periodic_fuzzy_delay: nova's periodic tasks start at once, not up to 60 s late
        # (a random delay; nova 31 drew 59 s once, past the tests' waits).
        "DEFAULT": {**common["DEFAULT"], "compute_driver": "rp_reporter.IronicDriver",
                    "update_resources_interval": interval, "periodic_fuzzy_delay": 0},
        "ironic": {"auth_type": "none", "endpoint_override": stack.ironic_url, "shard": shard,
                   **ironic_options},
        "rp_reporter": {"peers_from": "nova", **options},
    }))
    run(nova_bin, "nova-manage", "api_db", "sync", conf=str(conductor_conf))
    run(nova_bin, "nova-manage", "cell_v2", "map_cell0", "--database_connection",
        f"sqlite:///{tmp_path}/nova_cell0.db", conf=str(conductor_conf))
    run(nova_bin, "nova-manage", "cell_v2", "create_cell", "--name", "cell1",
        conf=str(conductor_conf))
    run(nova_bin, "nova-manage", "db", "sync", conf=str(conductor_conf))
    services = NovaServices(tmp_path, nova_bin)
    services.start("nova-conductor", conductor_conf)
    services.start("nova-compute", compute_conf)
    yield services
    services.stop()


class NovaServices:
    """The test's nova services, each started by its own command; ``log``: nova-compute's."""

    def __init__(self, path, bin_dir=BIN):
        self.path = path
        self.bin_dir = bin_dir
        self.log = path / "nova-compute.log"
        self.procs = {}  # name: (process, its configuration file)

    def start(self, name, conf):
        with open(self.path / f"{name}.log", "a") as log:  # a restart goes on in the same
            self.procs[name] = (subprocess.Popen(
                [os.path.join(self.bin_dir, name), "--config-file", str(conf)],
                stdout=log, stderr=subprocess.STDOUT), conf)

    def restart(self, name, while_down=lambda: None):
        """SIGTERM, as an operator's service manager stops it, ``while_down()``, then its
        command again."""
        proc, conf = self.procs[name]
        proc.send_signal(signal.SIGTERM)
        self._wait(proc)
        while_down()
        self.start(name, conf)

    def stop(self):
        for proc, _ in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs.values():
            self._wait(proc)

    @staticmethod
    def _wait(proc):
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def loads_the_driver_and_reports_the_nodes(nova_compute, ironic, placement):
    """nova-compute loaded ``compute_driver = rp_reporter.IronicDriver`` through nova's own
    loader, and its resource tracker reports each node through the driver (test_install
    makes this check on every release, from nova's own virtualenv with the driver
    installed as the README says)."""
    available = ironic.create(resource_class="baremetal-gold")
    maintenance = ironic.create(resource_class="baremetal-gold", maintenance=True)
    log = nova_compute.log

    def loaded():
        text = log.read_text()
        assert "Unable to load the virtualization driver" not in text, text[-3000:]
        return "rp_reporter's Ironic driver: provider content from rp_reporter's model" in text
    wait_for(loaded, 120, "nova-compute loading compute_driver = rp_reporter.IronicDriver")

    # The resource tracker reports each node through our update_provider_tree.
    def reported(node, reserved):
        provider = placement.provider(node)
        return bool(provider) and provider["inventories"].get("CUSTOM_BAREMETAL_GOLD") == (
            1, reserved, 1)
    wait_for(lambda: reported(available, 0) and reported(maintenance, 1), 120,
             "both nodes reported by nova-compute")
    for node in (available, maintenance):
        # nova's resource tracker adds its own traits after the driver: kept.
        assert {"COMPUTE_NODE"} <= placement.provider(node)["traits"], node


def compute_records(database):
    """nova's compute node records not deleted: {node: [the host of each]}."""
    found = {}
    with sqlite3.connect(database) as db:
        for node, host in db.execute("SELECT hypervisor_hostname, host FROM compute_nodes "
                                     "WHERE deleted = 0"):
            found.setdefault(node, []).append(host)
    return found


TAKEN_UP = re.compile(r"resource tracker at the service's start: (\d+) of (\d+) nodes taken "
                      r"up with their compute node records here .*start-up update over (\d+)")
PERIODIC = re.compile(r"resource tracker periodic: (\d+) of (\d+) nodes \(due: (\d+) new here, "
                      r"changed or touched since nova's last look, (\d+) not looked at")


@pytest.mark.skipif(releases.current().name not in (releases.OLDEST, releases.NEWEST),
                    reason="nova 32 and 33 run their periodic as nova 31 does (eventlet): "
                           "tested on the oldest release and the newest (CI's time)")
@pytest.mark.parametrize("nova_compute", [{"full_pass_every": 3, "interval": 5}],
                         indirect=True)
def test_between_full_passes_the_periodic_goes_over_only_the_changed_node(
        nova_compute, ironic, placement):
    """``full_pass_every = 3`` in a real nova-compute (``update_resources_interval`` 5 s):
    between full passes its periodic goes over a node that changed in Ironic, a node nova
    has not looked at for 12.5 s, or else the one it looked at least recently (never none:
    a build takes the first node of the answer); the nodes left out keep their compute
    node records and draw no orphan warning.  Its node refreshes list the whole fleet
    once a full pass and otherwise what Ironic wrote since, and miss no node created.
    Restarted with its records in place, it takes up its nodes with no server without
    nova's start-up update and updates them at its first periodic."""
    quiet, changed = [ironic.create(), ironic.create()], ironic.create()
    log = nova_compute.log
    database = log.parent / "nova.db"

    def records():
        return set(compute_records(database))

    def periodics():
        """(given, managed, due for a change, due for their age) of each partial line."""
        return [tuple(int(n) for n in found.groups())
                for found in map(PERIODIC.search, log.read_text().splitlines()) if found]

    def inventory(node):
        return (placement.provider(node) or {}).get("inventories", {}).get(
            "CUSTOM_BAREMETAL_GOLD")
    wait_for(lambda: all(inventory(n) for n in (*quiet, changed)), 120,
             "the three nodes reported by nova-compute")
    wait_for(lambda: any(p[1] == 3 and p[2] == 0 and p[3] >= 1 for p in periodics()), 60,
             "a periodic going over a node for its age only, nothing changed")
    ironic.set_maintenance(changed, True)
    seen = len(periodics())
    # No agent runs here: only nova's resource tracker, going over the changed node, can
    # reserve it in Placement.
    wait_for(lambda: inventory(changed)[1] == 1, 60, "the changed node reserved by nova")
    assert all(inventory(n)[1] == 0 for n in quiet)
    assert any(p[1] == 3 and p[2] == 1 for p in periodics()[seen:]), periodics()
    # A node created meanwhile reaches nova too, though its refreshes list the whole
    # fleet only once a full pass (12.5 s) and otherwise what Ironic wrote since.
    late = ironic.create()
    wait_for(lambda: inventory(late), 60, "a node created after the start, reported by nova")
    text = log.read_text()
    whole = text.count("nova's node refresh: the whole fleet listed")
    assert 1 <= whole < len(periodics()), (whole, len(periodics()))
    assert "Found orphan compute node" not in text and "Deleting orphan" not in text
    assert records() == {*quiet, changed, late}
    # nova-compute stopped (SIGTERM) and started again with its records in place: the
    # nodes with no server whose records are its own are taken up without nova's
    # start-up update, which goes over only a node created while it was down (no record
    # yet); its first periodic then goes over the nodes taken up, as new here.
    before, created = len(log.read_text()), []
    nova_compute.restart("nova-compute", while_down=lambda: created.append(ironic.create()))

    def since_restart():
        return log.read_text()[before:]
    wait_for(lambda: TAKEN_UP.search(since_restart()), 120, "the start's line")
    assert TAKEN_UP.search(since_restart()).groups() == ("4", "5", "1"), since_restart()[-3000:]
    wait_for(lambda: PERIODIC.search(since_restart()), 60, "the first periodic's line")
    assert PERIODIC.search(since_restart()).groups()[:3] == ("4", "5", "4")
    wait_for(lambda: records() == {*quiet, changed, late, *created}, 60,
             "the created node's record")
    assert all(map(placement.provider, [*quiet, changed, late, *created]))
    assert "Found orphan compute node" not in since_restart()
    assert "Deleting orphan" not in since_restart()


@pytest.fixture
def fleet_of_20(stack, ironic):
    """20 nodes made before nova-compute starts (a fixture the test names first), as if
    two minutes ago: past the listings' slack for clocks (60 s)."""
    nodes = ironic.create_many(20)
    ironic_service.backdate(stack, nodes, 120)
    return nodes


@pytest.mark.skipif(releases.current().name not in (releases.OLDEST, releases.NEWEST),
                    reason="nova 32 and 33 run on eventlet as nova 31 does: tested on the "
                           "oldest release and the newest (CI's time)")
@pytest.mark.parametrize("nova_compute", [{"full_pass_every": 30, "interval": 5,
                                           "notifications": True, "debug": True}],
                         indirect=True)
def test_a_node_deleted_while_not_due_leaves_at_the_next_periodic(
        fleet_of_20, nova_compute, ironic, placement):
    """Where the bus Ironic notifies on is configured, a node deleted in Ironic while it
    is not due leaves nova's node cache at the next refresh: nova's orphan handling
    deletes its compute node record and provider within a periodic or two, as stock
    nova's listing would.  The node deleted is the one nova looked at last: without the
    notification it would wait for its age, or for its turn as the node handed to nova
    when none is due (about 19 periodics among 20 nodes), or for the next whole listing
    (a full pass is 150 s here).  The nodes are older than the listings' slack, so each
    refresh lists what changed (nothing), not the whole fleet."""
    nodes = fleet_of_20
    log = nova_compute.log
    database = log.parent / "nova.db"
    wait_for(lambda: all(map(placement.provider, nodes)), 120, "the nodes reported by nova")
    wait_for(lambda: "listening for Ironic's notifications of deleted nodes" in
             log.read_text(), 30, "the driver's listener")
    periodics = len(PERIODIC.findall(log.read_text()))
    wait_for(lambda: len(PERIODIC.findall(log.read_text())) >= periodics + 2, 60,
             "two periodics between full passes")
    before = len(log.read_text())
    deleted = LOOKED_AT.findall(log.read_text())[-1]  # nova's last look
    ironic.delete(deleted)
    deleted_at = time.monotonic()
    wait_for(lambda: not placement.provider(deleted), 30,
             "the deleted node's provider deleted by nova's orphan handling")
    took = time.monotonic() - deleted_at
    text = log.read_text()[before:]
    assert f"node {deleted} deleted in Ironic (its notification" in text, text[-3000:]
    assert WHOLE_LISTING not in text and took < 15, took  # within three periodics
    assert set(compute_records(database)) == set(nodes) - {deleted}


LOOKED_AT = re.compile(r"Hypervisor/Node resource view: name=([0-9a-f-]{36})")
WHOLE_LISTING = "nova's node refresh: the whole fleet listed"
PERIODIC_START = "resource tracker periodic: "  # logged as the driver answers nova's periodic


@pytest.fixture
def fleet_of_60(stack, ironic):
    """60 nodes, enrolled before nova-compute starts (a fixture the test names first),
    as if two minutes ago: past the listings' slack for clocks (60 s), within which a
    node counts as written since each listing."""
    nodes = ironic.create_many(60, state="enroll", power=None)
    ironic_service.backdate(stack, nodes, 120)
    return nodes


@pytest.fixture
def conductor_group_other(stack, shard):
    """A second Ironic conductor, of conductor group "other"; an Ironic client of this
    test's shard through its API, the one that can move a node into that group."""
    service, url = ironic_service.start_conductor_group(stack, "other")
    yield clients.Ironic(url, shard, auth=stack.admin_auth("baremetal"))
    service.stop()


@pytest.mark.skipif(releases.current().name != releases.NEWEST,
                    reason="the listing's code and Ironic's paging are the same on every "
                           "release: tested once, on the newest (CI's time)")
@pytest.mark.parametrize("nova_compute", [{"full_pass_every": 3, "debug": True,
                                           # the default group: nova's scope has both keys
                                           "ironic": {"conductor_group": ""}}],
                         indirect=True)
def test_past_ironics_max_limit_and_never_a_node_gone_from_its_scope(
        fleet_of_60, conductor_group_other, nova_compute, ironic, placement):
    """Ironic answers pages of 20 nodes at most (``[api] max_limit``, tests/nova/conftest):
    nova's cache holds all 60 nodes of the service's shard and conductor group, each
    with its compute node record.  A node deleted from Ironic, one moved to another shard
    and one moved to another conductor group just after a whole listing read them (the
    fleet kept holds them until the next) never reach nova's resource tracker (its debug
    line for each node it goes over), though they fall due for their age meanwhile: the
    check before nova's periodic drops them from nova's cache, nova's orphan handling
    deletes the deleted one's record and provider, nothing re-creates them, and the moved
    ones' records keep their host."""
    nodes, log, database = fleet_of_60, nova_compute.log, nova_compute.path / "nova.db"
    wait_for(lambda: set(compute_records(database)) == set(nodes), 120,
             "a compute node record for each of the 60 nodes")
    assert all(map(placement.provider, nodes))

    def refreshes():
        """Each node refresh of nova's periodic: whether it listed the whole fleet."""
        found, whole = [], False
        for line in log.read_text().splitlines():
            whole = whole or WHOLE_LISTING in line
            if PERIODIC_START in line:
                found.append(whole)
                whole = False
        return found
    wait_for(lambda: refreshes()[-2:] == [False, False], 150, "refreshes listing what changed")

    def whole_listings():
        return log.read_text().count(WHOLE_LISTING)
    listed = whole_listings()
    wait_for(lambda: whole_listings() > listed, 60, "a whole listing beside the periodic")
    deleted, moved, regrouped = nodes[:3]
    ironic.delete(deleted)
    ironic.patch(moved, shard=f"{ironic.shard}-elsewhere")
    conductor_group_other.patch(regrouped, conductor_group="other")
    # from the first periodic that starts after the writes: the one under way may still
    # look at them (the window stock nova's listing leaves too)
    written = len(log.read_text())
    wait_for(lambda: PERIODIC_START in log.read_text()[written:], 60, "a periodic's start")
    after = log.read_text().index(PERIODIC_START, written)

    def since():
        return log.read_text()[after:]
    listed = whole_listings()
    # they fall due for their age within a full pass (25 s), before the next whole
    # listing (the one that would drop them) is taken: it starts a full pass after this
    wait_for(lambda: whole_listings() >= listed + 1, 90, "the next whole listing")
    text = since()
    for node in (deleted, moved, regrouped):
        assert f"Hypervisor/Node resource view: name={node}" not in text, node
    assert "Error updating resources for node" not in text
    checked = log.read_text()[written:]  # the check is logged before the periodic's line
    assert "no longer in Ironic's listing of this service's scope" in checked
    wait_for(lambda: not placement.provider(deleted), 60,
             "the deleted node's provider deleted by nova's orphan handling")
    periodics = len(PERIODIC.findall(since()))
    wait_for(lambda: len(PERIODIC.findall(since())) >= periodics + 2, 60, "two periodics")
    assert not placement.provider(deleted)  # not re-created
    assert f"Hypervisor/Node resource view: name={deleted}" not in since()
    checked = log.read_text()[written:]
    assert all(node in checked for node in (deleted, moved, regrouped))  # ours, and nova's
    records = compute_records(database)
    assert deleted not in records
    assert records[moved] == records[regrouped] == ["rp-compute-1"]
    assert set(records) == set(nodes) - {deleted}
    assert PERIODIC.findall(since())[-1][1] == "57"  # the nodes managed here now
