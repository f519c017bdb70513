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

"""The production-shaped stack (MariaDB, Keystone, etcd), started once per session,
with the same fixtures as tests/functional: those are imported from there, only
``stack`` differs (never skipped: a service that cannot start is an error)."""

import dataclasses
import signal
import time

import pytest

from tests.functional import agents as agent_helpers
from tests.functional.conftest import agents  # noqa: F401
from tests.functional.conftest import cli  # noqa: F401
from tests.functional.conftest import conf_file  # noqa: F401
from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import reconciler  # noqa: F401
from tests.functional.conftest import reporter_conf  # noqa: F401
from tests.functional.conftest import running_stack
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import write_conf  # noqa: F401
from tools import clients
from tools import localstack


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory, **localstack.PRODUCTION)


@dataclasses.dataclass
class EarlyAgent:
    agent: agent_helpers.AgentProcess
    ironic: clients.Ironic
    nodes: list
    started: float  # time.monotonic() before it obtained its first tokens


@pytest.fixture(scope="session", autouse=True)
def early_agent(stack, tmp_path_factory):
    """An agent started with the session, in a shard of its own, for test_tokens.py
    (run last): by then the suite has outlived its first tokens, so the test waits out
    only what is left of their lifetime, not the whole of it (180 s on its own)."""
    its_ironic = clients.Ironic(stack.ironic_url, "early-agent",
                              auth=stack.admin_auth("baremetal"))
    nodes = its_ironic.create_many(3)
    started = time.monotonic()
    # A group of its own: in the tests' group it would take a share of their nodes.
    agent = agent_helpers.AgentProcess(stack, "early-agent", tmp_path_factory.mktemp("early"),
                                       "agent-early",
                                       coordination={"group": "rp-early-agent"}).start()
    yield EarlyAgent(agent, its_ironic, nodes, started)
    agent.stop(signal.SIGKILL)


def pytest_collection_modifyitems(items):
    """test_tokens.py last: its agent started with the session (``early_agent``)."""
    items.sort(key=lambda item: item.module.__name__.endswith("test_tokens"))
