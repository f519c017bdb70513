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

"""The agent's loop around the shared listing: stopping never starts a listing, a
member's health comes from its own calls, and /healthz fails once passes stop
completing."""

import threading
import time

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter import metrics as rp_metrics
from rp_reporter.agent import health as rp_health
from rp_reporter.outage import Outage


class Sharing:
    """A member whose slice never comes: ``on_slice`` runs while it is asked for."""

    def __init__(self, on_slice=lambda: None):
        self.on_slice = on_slice

    def is_lister(self):
        return False

    def slice(self, expected, stopping, resync_now):
        self.on_slice()

    def wait_seconds(self):
        return 0


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[coordination]\nheartbeat = 0.1\n[reconcile]\ninterval = 5\n")
    return rp_agent.Agent(rp_conf.load(["--config-file", str(path)]))


def test_stopping_while_waiting_for_a_slice_starts_no_listing(agent):
    agent.sharing = Sharing(on_slice=agent.stopping.set)
    passes = []
    agent.resync.run = lambda listing, tee: passes.append(listing)
    agent.cycle()
    assert passes == []


def test_a_pass_on_a_slice_checks_this_agents_own_access(agent):
    denied = errors.ServiceError("placement", errors.DENIED, "Placement: 403")
    agent.node_sync.ironic.probe = lambda: None

    def refused():
        raise denied
    agent.node_sync.provider_sync.placement.probe = refused
    agent.resync.check_own_access()
    assert agent.outages["placement"].error is denied
    assert agent.outages["ironic"].down_since is None


class Ownership:
    fenced = False


def test_healthz_fails_once_no_pass_completed_for_two_cycles():
    now = [0.0]
    health = rp_health.Health(rp_metrics.Metrics(), Ownership(),
                              {"ironic": Outage("Ironic")}, Outage("traits"),
                              rp_health.Supervisor(threading.Event()), pass_due=lambda: 20,
                              clock=lambda: now[0])
    health.ready.set()
    assert health.healthy() == (True, "ok")
    health.began()
    now[0] = 15
    assert health.healthy()[0]  # a long pass under way
    now[0] = 25
    assert health.healthy() == (False, "no reconcile pass completed for 25 s (due 20 s)")
    health.passed()
    assert health.healthy()[0]
    now[0] = 46
    assert not health.healthy()[0]  # nothing began since: the loop is stuck


class Drift:
    """What a pass found: two nodes out of step, one provider to create."""
    changed, nodes, skipped = 2, 10, 0
    keys = ["n1", "n2"]
    listed = {"n1": "n1 as listed"}

    def __init__(self):
        self.new = ["n3"]
        self.verdict = type("Verdict", (), {"refused": None, "waiting": (), "delete": (),
                                            "reason": None})()


class Reconciler:
    def __init__(self):
        self.saved = 0

    def drift(self, listing, tee):
        return Drift()

    def create_in_bulk(self, new, enqueue, should_stop):
        enqueue(["n3"])  # a creation the bulk path leaves to the queue
        return iter(())

    def save_observations(self):
        self.saved += 1


def test_a_pass_enqueues_what_differs_and_what_bulk_creation_leaves(agent):
    queued, handed_over = [], []

    def enqueue(uuids, listed=None, listed_since=None):
        queued.extend(uuids)
        handed_over.append((listed, listed_since))

    agent.resync.reconciler = Reconciler()
    agent.resync.enqueue = enqueue
    before = time.monotonic()
    assert agent.resync.run(listing=None) is True
    assert queued == ["n1", "n2", "n3"]
    # Its own listing began after the pass did: read since then.
    (listed, since), (none, _) = handed_over
    assert listed == {"n1": "n1 as listed"} and before <= since <= time.monotonic()
    assert none is None  # the bulk path's leftovers replace nothing
    assert agent.resync.reconciler.saved == 1
    assert agent.metrics.reconcile_passes._value.get() == 1
