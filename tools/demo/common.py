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

"""What the demos share: an rp-reporter-agent process on the stack, a wait that says
whether something was seen, and a plain table."""

import os
import subprocess
import sys

from tools import localstack
from tools.wait import NotSeen
from tools.wait import wait_for


def table(rows, columns):
    widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(columns)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([line.format(*columns), line.format(*("-" * w for w in widths))]
                     + [line.format(*map(str, r)) for r in rows])


def start_agent(stack, workdir, name, shard, **sections):
    """An rp-reporter-agent process ``name`` on the stack's ``shard`` (its configuration
    file and log in ``workdir``, ``sections`` over the stack's defaults): (its
    configuration file, the process)."""
    conf = os.path.join(workdir, f"{name}.conf")
    with open(conf, "w") as f:
        f.write(stack.reporter_conf(
            DEFAULT={"host": name}, ironic={"shard": shard},
            agent={"metrics_bind": f"127.0.0.1:{localstack.free_port()}"}, **sections))
    return conf, subprocess.Popen(
        [sys.executable, "-m", "rp_reporter.agent", "--config-file", conf],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, f"{name}.log"), "w"))


def wait(check, timeout):
    """Whether ``check()`` held within ``timeout`` seconds (the demo says when not)."""
    try:
        wait_for(check, timeout, "the demo's check")
    except NotSeen:
        return False
    return True
