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

"""Tokens expire (the stack issues them for localstack.TOKEN_EXPIRATION seconds): an
agent started with one keeps working after it has expired.  The agent is the session's
``early_agent`` (conftest.py) and this test runs last, so the suite's other tests fill
most of the wait."""

import time

import pytest

from tests.functional.agents import inventory
from tests.functional.agents import traits
from tools import localstack
from tools.wait import wait_for

pytestmark = pytest.mark.functional


def test_agent_keeps_syncing_after_its_first_token_expired(placement, early_agent):
    agent, ironic, nodes = early_agent.agent, early_agent.ironic, early_agent.nodes
    wait_for(lambda: all(inventory(placement, n) for n in nodes), 60, "providers created")
    # Past the lifetime of every token the agent obtained at start.
    time.sleep(max(0.0, localstack.TOKEN_EXPIRATION + 5
                   - (time.monotonic() - early_agent.started)))
    ironic.set_traits(nodes[0], ["CUSTOM_AFTER_EXPIRY"])
    wait_for(lambda: "CUSTOM_AFTER_EXPIRY" in traits(placement, nodes[0]), 15,
             "a change made after the agent's first tokens expired")
    assert agent.healthy()
    assert "HTTP 401" not in agent.output() and "Unauthorized" not in agent.output()
