"""The agent's loop around the shared listing: a member's wait has a bound, stopping
never starts a listing, a member's health comes from its own calls, and /healthz
fails once passes stop completing."""

import threading
import time

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter.agent import health as rp_health
from rp_reporter.outage import Outage


class Sharing:
    """A member whose lister keeps sending pages of a listing that never ends."""

    def __init__(self, on_take=lambda: None, wait_max=0.3):
        self.on_take, self._wait_max, self.refused = on_take, wait_max, "none arrived"

    def lists(self):
        return False

    def take(self):
        self.on_take()

    def arriving(self, begun_by):
        return True

    def wait(self):
        return 1e9  # what a forged end's seconds once made it

    def wait_max(self):
        return self._wait_max


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[coordination]\nheartbeat = 0.1\n[reconcile]\ninterval = 5\n")
    return rp_agent.Agent(rp_conf.load(["--config-file", str(path)]))


def test_a_members_wait_ends_at_its_bound_however_long_pages_keep_coming(agent):
    agent.sharing = Sharing(wait_max=0.3)
    started = time.monotonic()
    assert agent.listing_for_pass() is None
    assert time.monotonic() - started < 0.3 + 0.5


def test_stopping_while_waiting_for_a_slice_starts_no_listing(agent):
    agent.sharing = Sharing(on_take=agent.stopping.set, wait_max=5)
    passes = []
    agent.resync = passes.append
    agent.cycle()
    assert passes == []


def test_a_pass_on_a_slice_checks_this_agents_own_access(agent):
    denied = errors.ServiceError("placement", errors.DENIED, "Placement: 403")
    agent.ironic.probe = lambda: None

    def refused():
        raise denied
    agent.syncer.placement.probe = refused
    agent.check_own_access()
    assert agent.deps["placement"].error is denied
    assert agent.deps["ironic"].down_since is None


class Ownership:
    fenced = False


def test_healthz_fails_once_no_pass_completed_for_two_cycles():
    now = [0.0]
    health = rp_health.Health(rp_agent.controller.rp_metrics.Metrics(), Ownership(),
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
