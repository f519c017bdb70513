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

"""rp-reporter-agent as a real process, for the functional tests."""

import os
import signal
import subprocess
import sys

from tools import clients
from tools import localstack
from tools.wait import wait_for


def inventory(placement, node):
    """The provider's inventories, or None while it does not exist (safe in a wait)."""
    provider = placement.provider(node)
    return provider and provider["inventories"]


def traits(placement, node):
    """The provider's traits, or an empty set while it does not exist."""
    provider = placement.provider(node)
    return provider["traits"] if provider else set()


class AgentProcess:
    def __init__(self, stack, shard, tmp_path, name="agent", **sections):
        self.port = localstack.free_port()
        sections.setdefault("reconcile", {}).setdefault("interval", 3600)
        sections.setdefault("agent", {})["metrics_bind"] = f"127.0.0.1:{self.port}"
        sections.setdefault("ironic", {})["shard"] = shard
        sections.setdefault("DEFAULT", {})["host"] = name
        self.conf = tmp_path / f"{name}.conf"
        self.conf.write_text(stack.reporter_conf(**sections))
        self.log_path = tmp_path / f"{name}.log"
        self.proc = None

    def start(self, wait_healthy=True, env=None):
        """Start it (``env``: over this process's environment), in its own directory:
        ``-m`` puts the working directory first on the path, and the repository root
        (tox's) would shadow the tree ``env``'s PYTHONPATH names."""
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rp_reporter.agent", "--config-file", str(self.conf)],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.conf.parent,
            env=dict(os.environ, **env) if env else None)
        wait_for(self.healthy if wait_healthy else lambda: self.health()[0], 30,
                 "agent health endpoint")
        return self

    def health(self):
        """(status, body) of /healthz, or (None, "") while it does not answer."""
        return clients.health(self.port)

    def healthy(self):
        return self.health()[0] == 200

    def metric(self, name, labels=""):
        return clients.metrics(self.port).get(name + labels, 0.0)

    def output(self):
        return self.log_path.read_text()

    def stop(self, sig=signal.SIGTERM):
        return stop_all([self], sig)[0]


def stop_all(agents, sig=signal.SIGTERM):
    """Signal every running agent at once, then wait for each (an agent can take seconds
    to leave its group, so one after another adds up); their exit codes."""
    for agent in agents:
        if agent.proc and agent.proc.poll() is None:
            agent.proc.send_signal(sig)
    return [agent.proc.wait(15) if agent.proc else None for agent in agents]


def agents_fixture(stack, shard, tmp_path):
    started = []

    def start(name="agent", scope=None, wait_healthy=True, **sections):
        agent = AgentProcess(stack, scope or shard, tmp_path, name, **sections).start(
            wait_healthy)
        started.append(agent)
        return agent
    yield start
    for agent in started:
        agent.stop(signal.SIGKILL)


def operator_cli(stack, *args):
    """``rp-reporter ARGS`` through its console entry, as an operator runs it against
    the stack's coordination backend; its output (a non-zero exit fails the test)."""
    conf = os.path.join(stack.workdir, "rp_reporter-operator.conf")
    with open(conf, "w") as f:
        f.write(stack.reporter_conf(coordination={"backend_url": stack.coordination_url}))
    done = subprocess.run([os.path.join(sys.prefix, "bin", "rp-reporter"), "--config-file",
                           conf, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout
