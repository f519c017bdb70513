"""The agent behind Keystone: the fast path (every kind of change), and a token that
expires under a running agent."""

import time

import pytest

from tests.functional.agents import inventory
from tests.functional.agents import wait_for
from tests.functional.test_agent import GOLD
from tests.functional.test_agent import test_fast_path_carries_each_kind_of_change  # noqa: F401
from tools import localstack

pytestmark = pytest.mark.functional


def test_a_token_expires_under_a_running_agent_and_nothing_fails(agents, ironic, placement):
    started = time.monotonic()
    agent = agents(name="long-lived")  # reconcile hourly: only notifications carry changes
    node = ironic.create()
    wait_for(lambda: inventory(placement, node) == {GOLD: (1, 0, 1)}, 20, "created")
    # Past the lifetime of every token the agent got at start: keystoneauth renews
    # before expiry (under 120 s left), so no request meets an expired token.
    time.sleep(max(0.0, localstack.TOKEN_EXPIRATION + 5 - (time.monotonic() - started)))
    ironic.set_maintenance(node, True)
    wait_for(lambda: inventory(placement, node) == {GOLD: (1, 1, 1)}, 10, "maintenance")
    assert agent.healthy()
    log = agent.output()
    assert "refuses the reporter" not in log and "cannot be used as configured" not in log
    assert "unavailable, retrying" not in log and "401" not in log
