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

"""What a move does around a server's state, with nova's real classes: the check in
front of nova's manager (``guard``), the fence's scope (the group's record), a claim
left by a mover that died, and the forced-down flag a service clears.  What the new
home does to the server in each state: test_rehome_handlers."""

import threading
import time
import uuid

import pytest
from nova import context as nova_context
from nova.compute import task_states

from rp_reporter.nova_compute import claim
from rp_reporter.nova_compute import coordinated_ring
from rp_reporter.nova_compute import fencing
from rp_reporter.nova_compute import guard
from rp_reporter.nova_compute import hooks
from rp_reporter.nova_compute import rehome
from tests.nova.in_process.test_driver import CONF
from tests.nova.in_process.test_driver import HOSTS
from tests.nova.in_process.test_driver import Cell
from tests.nova.in_process.test_driver import NodeLookup
from tests.nova.in_process.test_driver import Row
from tests.nova.in_process.test_driver import a_record
from tests.nova.in_process.test_driver import an_instance
from tests.nova.in_process.test_driver import move_as
from tests.nova.in_process.test_driver import nova_config  # noqa: F401 - a fixture
from tests.nova.in_process.test_driver import rehoming_job

pytestmark = pytest.mark.usefixtures("nova_config")


class Membership:
    """A live membership (``fenced`` while its lease is lapsed)."""

    def __init__(self, fenced=False, lease=2.0):
        self.fenced, self.lease, self.lapses = fenced, lease, 0


class Handlers:
    """nova's manager, as far as its request handlers go: each records its call."""

    def __init__(self):
        self.calls = []

    def terminate_instance(self, context, instance, bdms):
        self.calls.append(("terminate", instance.uuid))

    def reboot_instance(self, context, instance, block_device_info, reboot_type):
        self.calls.append(("reboot", instance.uuid))


def test_a_request_for_a_server_moved_away_is_dropped_before_novas_manager(
        monkeypatch):
    """A resumed service takes a delete queued for a server that moved meanwhile: its
    handler never runs (no instance action, no port deallocated, nothing written), and
    nothing is raised (nova's RPC server logs nothing); a request for a server still
    homed here runs.  A service whose lease lapsed waits until it is a member again
    before it reads where the server is."""
    CONF.set_override("host", HOSTS[0])
    try:
        moved, here = an_instance(HOSTS[1], "n1"), an_instance(HOSTS[0], "n2")
        Cell(monkeypatch, {HOSTS[0]: (False, 1), HOSTS[1]: (False, 1)},
             {HOSTS[1]: [moved], HOSTS[0]: [here]})
        manager, membership = Handlers(), Membership(fenced=True)
        metrics = rehoming_job({HOSTS[0]}, NodeLookup({})).metrics
        guard.guard_manager(manager, membership, metrics)
        threading.Timer(0.5, lambda: setattr(membership, "fenced", False)).start()
        started = time.monotonic()
        assert manager.terminate_instance(None, instance=moved, bdms=[]) is None
        assert time.monotonic() - started >= 0.4  # read once a member again
        manager.reboot_instance(None, here, None, "HARD")
        assert manager.calls == [("reboot", here.uuid)]
        assert metrics.refused.labels("terminate_instance")._value.get() == 1
    finally:
        CONF.clear_override("host")


def test_only_a_member_of_the_group_in_scope_is_ever_forced_down(monkeypatch):
    """A stock nova-compute (never a member of the group) down with a server on an
    Ironic node: never looked at.  A member's service down whose every server is out of
    this service's scope (here: Ironic names another server on the node): nothing forced
    down, since the scope is read before the fence; once the cause is gone it is looked
    at again and moved."""
    stock_node, ours_node = str(uuid.uuid4()), str(uuid.uuid4())
    stock, ours = an_instance("stock-1", stock_node), an_instance("ours-dead", ours_node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "stock-1": (False, 3),
                              "ours-dead": (False, 3)},
                {"stock-1": [stock], "ours-dead": [ours]})
    lookup = NodeLookup({stock_node: stock.uuid, ours_node: "another-server"})
    record = a_record({HOSTS[0], "ours-dead"})
    job = rehoming_job({HOSTS[0]}, lookup, down=["stock-1", "ours-dead"], record=record)
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and record.movers() == {}
    assert job.counts == {"refused": 1}
    lookup.nodes[ours_node] = ours.uuid  # the cause gone
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == []  # looked at again only after RECHECK_REFUSED_S
    monkeypatch.setattr(rehome, "RECHECK_REFUSED_S", 0)
    job._settled.clear()
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [("forced down", "ours-dead"), ("instance", ours.uuid),
                          ("compute node", ours_node)]
    assert record.movers() == {"ours-dead": HOSTS[0]}


def test_a_member_held_down_for_an_upgrade_keeps_its_servers_until_the_hold_ends(
        monkeypatch, caplog):
    """An operator holds a member down for its upgrade (``compute-group hold``): down
    past its lease and nova's service_down_time, it is not forced down and its server
    stays, said once; once the hold has ended it is fenced as any other."""
    node = str(uuid.uuid4())
    server = an_instance("ours-upgrading", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "ours-upgrading": (False, 3)},
                {"ours-upgrading": [server]})
    record = a_record({HOSTS[0], "ours-upgrading"})
    record.hold("ours-upgrading", time.time() + 600)
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: server.uuid}), down=["ours-upgrading"],
                       record=record)
    with caplog.at_level("WARNING"):
        job.run_once(nova_context.get_admin_context())
        job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and record.movers() == {}
    assert sum("ours-upgrading is down but held until" in r.getMessage()
               for r in caplog.records) == 1
    record.hold("ours-upgrading", time.time() - 1)  # the hold's bound passed
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [("forced down", "ours-upgrading"), ("instance", server.uuid),
                          ("compute node", node)]


def held_member(monkeypatch):
    """A member down past its lease and service_down_time, with a server: (its server,
    its node, the cell, the group's record, the job of a survivor that saw it live)."""
    node = str(uuid.uuid4())
    server = an_instance("ours-upgrading", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "ours-upgrading": (False, 3)},
                {"ours-upgrading": [server]})
    record = a_record({HOSTS[0], "ours-upgrading"})
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: server.uuid}), down=["ours-upgrading"],
                       record=record)
    job.ring.seen = {HOSTS[0], "ours-upgrading"}
    return server, node, cell, record, job


def test_a_hold_set_while_the_round_read_the_nodes_is_honoured(monkeypatch):
    """The operator's hold lands between the round's read of the holds and the fence's
    write (seconds: the scope's reads): the fence reads the holds again first."""
    server, node, cell, record, job = held_member(monkeypatch)
    monkeypatch.setattr(hooks, "pause_after", lambda step: step == "fence decided" and (
        record.hold("ours-upgrading", time.time() + 600)))
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and record.movers() == {}


def test_a_movers_wall_clock_stepped_past_a_hold_fences_no_held_service(monkeypatch):
    """The mover read the hold, then its wall clock stepped an hour ahead (NTP, an
    operator's ``date``): the hold ends by the mover's monotonic clock, not by its
    wall clock, so the held service keeps its server."""
    server, node, cell, record, job = held_member(monkeypatch)
    record.hold("ours-upgrading", time.time() + 600)
    job.run_once(nova_context.get_admin_context())
    stepped = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: stepped)
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and record.movers() == {}


def test_a_hold_lost_with_the_backends_data_is_written_back(monkeypatch, caplog):
    """A backend restarted without persistence (or flushed) loses the record, holds
    included; the members and the movers' names were written back by the survivors,
    and now the holds they saw are too: the held service is not fenced."""
    server, node, cell, record, job = held_member(monkeypatch)
    record.hold("ours-upgrading", time.time() + 600)
    job.run_once(nova_context.get_admin_context())
    for name in record.names.names("nova-g:"):  # the backend's data gone
        record.names.remove_name(name)
    with caplog.at_level("WARNING"):
        job.run_once(nova_context.get_admin_context())
        job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and record.movers() == {}
    assert set(record.holds()) == {"ours-upgrading"}
    assert "its hold (rp-reporter compute-group hold) was lost" in caplog.text
    record.release("ours-upgrading")  # released by the operator: not written back
    job.run_once(nova_context.get_admin_context())
    assert record.holds() == {} and cell.moves[0] == ("forced down", "ours-upgrading")


def test_a_server_whose_node_ironic_failed_to_answer_is_tried_again_next_round(
        monkeypatch):
    """An Ironic error is no refusal: the next round reads the node again (a refused
    service waits RECHECK_REFUSED_S)."""
    node = str(uuid.uuid4())
    instance = an_instance("compute-dead", node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "compute-dead": (False, 3)},
                {"compute-dead": [instance]})
    lookup = NodeLookup({node: instance.uuid}, failing=[node])
    job = rehoming_job({HOSTS[0]}, lookup, down=["compute-dead"])
    job.run_once(nova_context.get_admin_context())
    assert cell.moves == [] and job.counts == {"failed": 1}
    lookup.failing.clear()
    job.run_once(nova_context.get_admin_context())
    assert ("instance", instance.uuid) in cell.moves


def test_a_claim_left_by_a_mover_that_died_is_finished_by_the_next_owner(
        monkeypatch):
    """A mover that died after its claim: the server stays on the fenced service, in
    nova's own ``migrating`` with the mover and the task state it found in its system
    metadata.  Held by a live mover, it is left to it; once that mover is no live
    member, the next owner finishes the move, and the task state found is the
    server's again.  An earlier release's claim (a task state of its own) too."""
    row = Row(monkeypatch, an_instance("compute-dead", str(uuid.uuid4())))
    row.values.update(task_state=task_states.MIGRATING,
                      system_metadata={claim.CLAIM_KEY: "compute-mover rebooting_hard"})
    CONF.set_override("host", HOSTS[0])
    try:
        assert rehome.Rehoming._move_instance(
            nova_context.get_admin_context(), row.read(), "compute-dead",
            members={HOSTS[0], "compute-mover"}) is False
    finally:
        CONF.clear_override("host")
    assert row.values["host"] == "compute-dead"
    assert move_as(HOSTS[0], row.read()) is True
    assert row.values == {"host": HOSTS[0], "task_state": "rebooting_hard",
                          "system_metadata": {}}
    row = Row(monkeypatch, an_instance("compute-dead", str(uuid.uuid4())))
    row.values["task_state"] = "rp-reporter-rehoming-compute-mover"
    assert move_as(HOSTS[1], row.read()) is True
    assert row.values == {"host": HOSTS[1], "task_state": None, "system_metadata": {}}


class Saved:
    """A service record whose save is recorded (nova's reports counted)."""

    def __init__(self, forced_down):
        self.forced_down, self.saved, self.report_count = forced_down, [], 1

    def save(self):
        self.saved.append(self.forced_down)


def a_service_watching_its_flag(monkeypatch, service, record, starting=False):
    """compute-a's ring as its renewal thread has it: a live member whose flag is read
    at its first renewal, ``service`` its Service record, ``record`` the group's; nova's
    start-up done (a report counted since the ring first read the record), unless
    ``starting``."""
    monkeypatch.setattr(fencing, "service_record", lambda ctxt, host: service)
    ring = coordinated_ring.CoordinatedRing.__new__(coordinated_ring.CoordinatedRing)
    ring.membership, ring._lapses_seen = Membership(), None
    ring._reports_at_start = None if starting else service.report_count - 1
    ring._next_flag_check, ring._lifted_seen = 0.0, {}
    ring.record = record
    ring.conf = type("Conf", (), {"coordination": type("C", (), {"group": "g"})})
    return ring


def read_again(ring, monkeypatch, lapse=False):
    """The ring's next read of its flag: after a lapse, or one report_interval later."""
    ring._next_flag_check = 0.0
    ring.membership.lapses += lapse
    ring._clear_forced_down_once_live()


@pytest.mark.parametrize("mover", ["compute-b", None])
def test_a_service_live_again_clears_only_a_forced_down_a_mover_set(
        monkeypatch, mover):
    """A mover's flag is cleared (and its name in the group's record); an operator's,
    or an evacuation tool's, stays.  The service records itself as a member of the
    group either way."""
    CONF.set_override("host", HOSTS[0])
    try:
        service, record = Saved(forced_down=True), a_record(())
        if mover:
            record.forced_down(HOSTS[0], mover)
        ring = a_service_watching_its_flag(monkeypatch, service, record)
        ring._clear_forced_down_once_live()
        read_again(ring, monkeypatch)
    finally:
        CONF.clear_override("host")
    assert record.members() == {HOSTS[0]}
    assert service.saved == ([False] if mover else [])
    assert record.movers() == {}


def test_a_movers_flag_stays_until_nova_has_the_restarted_services_first_report(
        monkeypatch):
    """Restarted after a mover forced it down: the flag stays while nova's start-up
    runs (cleared then, nova would show its scheduler a service up by its last report
    before it died, and its start-up would end a build sent meanwhile in ERROR), and
    goes at the first read after nova counts a report of this process."""
    CONF.set_override("host", HOSTS[0])
    try:
        service, record = Saved(forced_down=True), a_record(())
        record.forced_down(HOSTS[0], "compute-b")
        ring = a_service_watching_its_flag(monkeypatch, service, record, starting=True)
        ring._clear_forced_down_once_live()  # at its join, in the driver's init_host
        read_again(ring, monkeypatch)  # nova's init_host still running
        assert service.saved == [] and record.movers() == {HOSTS[0]: "compute-b"}
        service.report_count += 1  # nova's Service.start done: its first report
        ring._clear_forced_down_once_live()
    finally:
        CONF.clear_override("host")
    assert service.saved == [False] and record.movers() == {}


def test_forced_down_by_a_mover_just_after_it_rejoined_is_cleared_within_an_interval(
        monkeypatch):
    """The mover read the service out of the group, the service rejoined and read its
    flag (not set yet), then the mover forced it down: no lapse follows, and the next
    read of the flag (every report_interval) clears it."""
    CONF.set_override("host", HOSTS[0])
    try:
        service, record = Saved(forced_down=False), a_record(())
        ring = a_service_watching_its_flag(monkeypatch, service, record)
        ring._clear_forced_down_once_live()  # rejoined: nothing to clear yet
        record.forced_down(HOSTS[0], "compute-b")
        service.forced_down = True
        ring._clear_forced_down_once_live()  # within the interval: not read again
        assert service.saved == []
        read_again(ring, monkeypatch)
    finally:
        CONF.clear_override("host")
    assert service.saved == [False] and record.movers() == {}


def test_an_operators_flag_set_after_it_lifted_a_movers_is_kept(monkeypatch):
    """A mover forced the service down; an operator lifted the flag (the mover's name
    stays in the record) and, later, set it again: the service keeps the operator's
    flag.  The name goes once two reads an interval apart find the flag lifted (a
    mover sets its flag right after its name: one read may fall between the two)."""
    CONF.set_override("host", HOSTS[0])
    try:
        service, record = Saved(forced_down=False), a_record(())
        record.forced_down(HOSTS[0], "compute-b")  # and the operator lifted the flag
        ring = a_service_watching_its_flag(monkeypatch, service, record)
        ring._clear_forced_down_once_live()
        assert record.movers() == {HOSTS[0]: "compute-b"}  # may be a mover mid-way
        read_again(ring, monkeypatch)
        assert record.movers() == {}
        service.forced_down = True  # the operator's, later
        read_again(ring, monkeypatch, lapse=True)
        read_again(ring, monkeypatch)
    finally:
        CONF.clear_override("host")
    assert service.saved == [] and service.forced_down


def test_a_movers_name_an_operator_took_over_is_not_written_back(monkeypatch):
    """A mover forced a dead service down; the operator set the flag again (nova's
    service.update under the operator's user: ``operator_flags`` drops the mover's
    name).  The mover's next rounds leave the name dropped (written back only after
    the backend lost its data), so the service's restart leaves the operator's flag."""
    server, node, cell, record, job = held_member(monkeypatch)
    job.run_once(nova_context.get_admin_context())
    assert cell.moves[0] == ("forced down", "ours-upgrading")
    assert record.movers() == {"ours-upgrading": HOSTS[0]}
    record.cleared("ours-upgrading")  # the operator's save, heard
    job.run_once(nova_context.get_admin_context())
    job.run_once(nova_context.get_admin_context())
    assert record.movers() == {}


def test_a_movers_name_whose_flag_an_operator_lifted_goes_while_its_service_is_dead(
        monkeypatch):
    """A mover forced a dead service down; an operator lifted the flag while the service
    is still dead (and may set it again before it returns).  The movers' rounds drop the
    mover's name once two rounds in a row find the flag lifted; the service, back, then
    finds no mover's flag to clear.  A name whose flag is still set stays."""
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 1), "lifted": (False, 3),
                              "still-down": (True, 3)}, {})
    record = a_record({HOSTS[0], "lifted", "still-down"})
    record.forced_down("lifted", "compute-x")
    record.forced_down("still-down", "compute-x")
    job = rehoming_job({HOSTS[0]}, NodeLookup({}), down=["lifted", "still-down"],
                       record=record)
    job.run_once(nova_context.get_admin_context())
    assert record.movers() == {"lifted": "compute-x", "still-down": "compute-x"}
    job.run_once(nova_context.get_admin_context())
    assert record.movers() == {"still-down": "compute-x"}
    assert cell.moves == []
