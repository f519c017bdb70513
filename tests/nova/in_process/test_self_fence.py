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
record once, and restarts in place, before it acts, when nova has it forced down; the
restart itself, in a process of its own (the command run again, or a worker's exit)."""

import multiprocessing
import os
import subprocess
import sys
import textwrap
import uuid

import pytest
from nova import context as nova_context

from rp_reporter.nova_compute import self_fence
from tests.nova.in_process.test_driver import HOSTS
from tests.nova.in_process.test_driver import FakeConnection
from tests.nova.in_process.test_driver import Fleet
from tests.nova.in_process.test_driver import an_instance
from tests.nova.in_process.test_driver import nova_config  # noqa: F401 - a fixture

HEARTBEAT = 1.0


class Membership:
    """What the self-fence reads of a Group, set by the test."""
    fenced = False
    lapses = 0
    heartbeat = HEARTBEAT


class Restarted(Exception):
    """The test's restart: raised, so nothing after it runs (as after os.execv)."""


class Fence:
    """A SelfFence on a test membership and a test record; ``reads`` counts the record's
    reads, ``forced``: what it answers (an exception is raised)."""

    def __init__(self):
        self.membership, self.reads, self.forced, self.now = Membership(), 0, False, 0.0
        self.fence = self_fence.SelfFence(self.membership, self._read, restart=self._restart,
                                          clock=lambda: self.now)

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


def test_while_lapsed_the_record_is_read_at_most_once_a_heartbeat(fence):
    """A partition, or the instant after a pause before the renewal thread ran."""
    fence.membership.fenced = True
    for _ in range(5):
        fence.fence.check("a request to Ironic")
    assert fence.reads == 1
    fence.now += HEARTBEAT
    fence.forced = True  # a mover forced it down meanwhile
    with pytest.raises(Restarted):
        fence.fence.check("a request to Ironic")


def test_a_record_that_cannot_be_read_is_read_again_at_the_next_check(fence, caplog):
    fence.membership.lapses, fence.forced = 1, RuntimeError("conductor unreachable")
    fence.fence.check("a request to Ironic")  # nova's own writes fail as well meanwhile
    assert "could not be read after a lapse" in caplog.text
    fence.forced = True
    with pytest.raises(Restarted):
        fence.fence.check("a request to Ironic")
    assert fence.reads == 2


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
