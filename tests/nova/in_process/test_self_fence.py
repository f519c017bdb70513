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

"""Self-fencing (``self_fence``): after a lapse of its lease a service reads its own
record, and restarts in place, before it acts, when nova has it forced down or the
record cannot be read; the
restart itself, in a process of its own (the command run again, or a worker's exit)."""

import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest
from nova import context as nova_context
from nova.virt.ironic import driver as ironic_driver

from rp_reporter.nova_compute import claim
from rp_reporter.nova_compute import hooks
from rp_reporter.nova_compute import rehome
from rp_reporter.nova_compute import self_fence
from tests.nova.in_process.test_driver import CONF
from tests.nova.in_process.test_driver import HOSTS
from tests.nova.in_process.test_driver import Cell
from tests.nova.in_process.test_driver import FakeConnection
from tests.nova.in_process.test_driver import Fleet
from tests.nova.in_process.test_driver import NodeLookup
from tests.nova.in_process.test_driver import Row
from tests.nova.in_process.test_driver import an_instance
from tests.nova.in_process.test_driver import nova_config  # noqa: F401 - a fixture
from tests.nova.in_process.test_driver import rehoming_job


class Membership:
    """What the self-fence reads of a Group, set by the test; ``dropped``: the backend
    no longer has the member (True), or does not answer (an exception)."""
    fenced = False
    lapses = 0
    dropped = False

    def confirm(self):
        if isinstance(self.dropped, Exception):
            raise self.dropped
        if self.dropped:
            self.fenced = True  # as a Group: fenced until its next renewal
        return not self.dropped


class Restarted(Exception):
    """The test's restart: raised, so nothing after it runs (as after os.execv)."""


class Fence:
    """A SelfFence on a test membership and a test record; ``reads`` counts the record's
    reads, ``forced``: what it answers (an exception is raised)."""

    def __init__(self):
        self.membership, self.reads, self.forced = Membership(), 0, False
        self.fence = self_fence.SelfFence(self.membership, self._read, restart=self._restart)

    def _read(self):
        self.reads += 1
        if isinstance(self.forced, Exception):
            raise self.forced
        return self.forced

    @staticmethod
    def _restart(why):
        raise Restarted(why)


@pytest.fixture
def fence():
    return Fence()


def test_no_lapse_no_read(fence):
    fence.forced = True  # an operator's flag: nothing lapsed, nothing to fear
    for _ in range(3):
        fence.fence.check("a request to Ironic")
    assert fence.reads == 0


def test_a_lapse_with_the_service_forced_down_restarts_it_before_it_acts(fence):
    fence.membership.lapses, fence.forced = 1, True
    with pytest.raises(Restarted, match="before the wait for a deploy"):
        fence.fence.check("the wait for a deploy")


def test_a_lapse_with_the_service_not_forced_down_is_read_once(fence):
    fence.membership.lapses = 1
    fence.fence.check("a request to Ironic")
    fence.forced = True  # forced down later, with no lapse since: a live member's record
    fence.fence.check("nova's terminate_instance")
    assert fence.reads == 1
    fence.membership.lapses = 2  # the next lapse is read again
    with pytest.raises(Restarted):
        fence.fence.check("a request to Ironic")


def test_while_lapsed_every_check_reads_the_record_again(fence):
    """A partition, or the instant after a pause before the renewal thread ran: a mover
    forces the service down right before it moves its servers, so a read a moment ago
    is no answer for another thread now (it once was, for a heartbeat)."""
    fence.membership.fenced = True
    for _ in range(3):
        fence.fence.check("a request to Ironic")
    assert fence.reads == 3
    fence.forced = True  # a mover forced it down meanwhile, within the same heartbeat
    with pytest.raises(Restarted):
        fence.fence.check("a request to Ironic")


def test_a_record_that_cannot_be_read_after_a_lapse_stops_the_service(fence):
    """Cut off from nova-conductor as well as from the backend: unknown is not go (it
    once logged and went on, to Ironic, neutron and Placement for a moved server)."""
    fence.membership.lapses, fence.forced = 1, RuntimeError("conductor unreachable")
    with pytest.raises(Restarted, match="could not be read .*RuntimeError: conductor "
                                        "unreachable.*before a request to Ironic"):
        fence.fence.check("a request to Ironic")
    fence.membership.lapses, fence.membership.fenced = 0, True  # lapsed by its own clock
    fence.fence = self_fence.SelfFence(fence.membership, fence._read,
                                       restart=fence._restart)
    with pytest.raises(Restarted):
        fence.fence.check("nova's terminate_instance")


RESTARTING = textwrap.dedent("""\
    import os, sys
    from rp_reporter.nova_compute import self_fence
    print(os.getpid(), sys.argv[1:], flush=True)
    if not os.environ.get("RESTARTED"):
        os.environ["RESTARTED"] = "1"
        self_fence.restart_in_place("a test")
        print("went on after the restart", flush=True)
    """)


def test_a_process_restarts_in_place_with_its_own_command(tmp_path):
    """nova 31 to 33 (eventlet): the process runs its command again, same pid."""
    script = tmp_path / "service.py"
    script.write_text(RESTARTING)
    out = subprocess.run([sys.executable, "-u", str(script), "--config-file", "x.conf"],
                         capture_output=True, text=True, timeout=120, check=True,
                         env=dict(os.environ, RESTARTED="")).stdout.splitlines()
    assert len(out) == 2 and "went on" not in "".join(out), out
    first, second = out
    assert first == second  # the same pid, the same arguments
    assert first.endswith("['--config-file', 'x.conf']")


def _worker():
    self_fence.restart_in_place("a test")


def test_a_worker_of_a_process_manager_exits_for_its_manager_to_start_anew():
    """nova 34 on: oslo.service's process manager runs the service in a worker."""
    worker = multiprocessing.get_context("fork").Process(target=_worker)
    worker.start()
    worker.join(60)
    assert worker.exitcode == 1


@pytest.mark.usefixtures("nova_config")
def test_a_deploy_in_flight_stops_before_it_reads_the_server_or_ironic(fence):
    """A service paused while nova deployed a server (``spawning``) resumes after a
    survivor moved the server and set it to ERROR: nova's next poll would read the
    server (``instance.refresh``), fail the build and let nova's failure handler clear
    its host, node and ports.  The poll self-fences first; so does any request to
    Ironic, and any operation."""
    asked = []
    ironic = FakeConnection([])
    ironic.nodes = lambda **query: asked.append(query) or iter(())
    driver = Fleet.driver("ours", ironic)
    driver._self_fence = fence.fence
    instance = an_instance(HOSTS[0], str(uuid.uuid4()))
    instance.refresh = lambda *args, **kwargs: asked.append("the server read")
    fence.membership.lapses, fence.forced = 1, True  # paused, and forced down meanwhile
    with pytest.raises(Restarted):
        driver._wait_for_active(instance)
    with pytest.raises(Restarted):
        driver.ironic_connection  # noqa: B018 - the property is the request's way in
    driver._rehoming = object()  # servers can move between these services
    with pytest.raises(Restarted):
        driver.destroy(nova_context.get_admin_context(), instance, None)
    assert asked == []
    fence.forced = False  # the next lapse, not forced down: nova's poll goes on
    fence.membership.lapses = 2
    assert driver.ironic_connection is ironic


@pytest.mark.usefixtures("nova_config")
def test_a_build_paused_after_its_vifs_stops_before_novas_unconditional_save(
        fence, monkeypatch):
    """nova's build saves the server right after the driver attached its VIFs, with no
    expected task state (its block device step): a service paused after its last attach,
    whose server moved meanwhile, put it back to BUILD on its new home and only spawn
    fenced.  The driver's step now ends with the self-fence."""
    driver = Fleet.driver("ours", FakeConnection([]))
    driver._self_fence = fence.fence
    attached = []

    def attach_then_paused(self, instance, network_info):
        attached.append(instance.uuid)
        fence.membership.lapses, fence.forced = 1, True  # paused; moved and fenced
    monkeypatch.setattr(ironic_driver.IronicDriver,
                        "prepare_networks_before_block_device_mapping", attach_then_paused)
    instance = an_instance(HOSTS[0], str(uuid.uuid4()))
    with pytest.raises(Restarted, match="nova's save of instance"):
        driver.prepare_networks_before_block_device_mapping(instance, [])
    assert attached == [instance.uuid]


@pytest.mark.usefixtures("nova_config")
def test_a_pause_hidden_from_the_clocks_is_found_before_a_write(fence):
    """A VM paused by its hypervisor: its clocks stood still too, so no lapse shows until
    the next renewal.  A write (a driver operation, the wait of a deploy) asks the
    backend first, which dropped the member: forced down meanwhile, it restarts.  A
    request to Ironic alone does not ask (one per request would cost the periodic a
    backend read a node), and a backend that does not answer is no evidence."""
    driver = Fleet.driver("ours", FakeConnection([]))
    driver._self_fence, driver._rehoming = fence.fence, object()
    instance = an_instance(HOSTS[0], str(uuid.uuid4()))
    fence.forced, fence.membership.dropped = True, True
    driver.ironic_connection  # noqa: B018 - the property is the request's way in
    assert fence.reads == 0
    with pytest.raises(Restarted):
        driver.destroy(nova_context.get_admin_context(), instance, None)
    assert fence.reads == 1
    fence.membership.fenced, fence.membership.dropped = False, RuntimeError("backend down")
    driver._fence_check("a write", confirm=True)
    assert fence.reads == 1


class Exited(BaseException):
    """A restart that, as in production, never returns to the job: not an Exception,
    so no handler of the job's catches it and goes on to the next node."""


def _exit(why):
    raise Exited(why)


# The job's instants a mover can be paused at (``hooks.pause_after``), and what it has
# written by then: a pause past its lease lets another member fence it and finish.
WRITTEN_BY = {
    "fence decided": [],
    "forced down": ["forced down"],
    "host": ["forced down", "instance"],
    "action": ["forced down", "instance"],
}


@pytest.mark.usefixtures("nova_config")
@pytest.mark.parametrize("paused_after", sorted(WRITTEN_BY))
def test_a_mover_that_lost_its_turn_writes_nothing_more(monkeypatch, paused_after):
    """A mover paused past its lease at an instant of a move (a VM pause, SIGSTOP)
    resumes after another member forced it down and finished the move.  It restarts
    before its next write; it once went on, writing the node's compute node record
    back onto itself (the server living on the other), or forcing down a service."""
    dead, node = "compute-dead", str(uuid.uuid4())
    instance = an_instance(dead, node)
    cell = Cell(monkeypatch, {HOSTS[0]: (False, 5), dead: (False, 9)}, {dead: [instance]})
    job = rehoming_job({HOSTS[0]}, NodeLookup({node: instance.uuid}), down=[dead])
    membership = Membership()
    job.ring.self_fence = self_fence.SelfFence(
        membership, lambda: cell.services[HOSTS[0]][0], restart=_exit)

    def paused(step):
        if step == paused_after:  # past its lease; another member fenced it meanwhile
            membership.lapses += 1
            cell.services[HOSTS[0]] = (True, 5)
    monkeypatch.setattr(hooks, "pause_after", paused)
    with pytest.raises(Exited, match="forced down"):
        job.run_once(nova_context.get_admin_context())
    assert [write for write, _ in cell.moves] == WRITTEN_BY[paused_after]


@pytest.mark.usefixtures("nova_config")
def test_a_mover_that_lost_its_turn_after_its_claim_leaves_the_claim_to_the_next_owner(
        monkeypatch):
    """Between its claim and its write of the server's host: the host is not written,
    and the claim, a dead mover's to the next owner (``claim``), is finished there."""
    row = Row(monkeypatch, an_instance("compute-dead", str(uuid.uuid4())))
    CONF.set_override("host", HOSTS[0])
    try:
        with pytest.raises(Exited, match="before moving instance"):
            rehome.Rehoming._move_instance(
                nova_context.get_admin_context(), row.read(), "compute-dead",
                check=lambda what: _exit(f"before {what}"))
    finally:
        CONF.clear_override("host")
    assert row.values["host"] == "compute-dead"
    assert claim.claim_of(row.read()) == (HOSTS[0], None)


def test_a_read_of_its_record_that_does_not_answer_restarts_it():
    """Its bus cut off, the read of its own record does not fail: it waits on a
    connection retried without end.  Past its bound (nova's rpc_response_timeout) it is
    an unknown answer, so the service restarts instead of holding every thread."""
    fence = Fence()
    never = threading.Event()
    fence.fence = self_fence.SelfFence(fence.membership, never.wait,
                                       restart=fence._restart, read_within=0.2)
    fence.membership.lapses += 1  # its lease lapsed (cut off from the backend too)
    with pytest.raises(Restarted, match="no answer within 0.2 s"):
        fence.fence.check("a write")
    never.set()
