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

"""A redis-server of a test's own, which the test may stop, pause or break."""

import shutil
import signal
import subprocess

from tools import localstack
from tools.wait import wait_for


class Redis:
    """A redis-server of the test's own, which the test may break."""

    def __init__(self, workdir):
        self.port = localstack.free_port()
        self.workdir = workdir
        self.proc = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def start(self):
        self.proc = subprocess.Popen(
            [shutil.which("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: localstack.port_open(self.port), 10, "redis-server")
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a frozen one too
            self.proc.kill()
            self.proc.wait(10)

    def cli(self, *args):
        return subprocess.run([shutil.which("redis-cli"), "-p", str(self.port), *args],
                              capture_output=True, text=True, timeout=10).stdout.strip()

    def freeze(self, frozen=True):
        """SIGSTOP / SIGCONT: a server that hangs, every call waiting for its timeout."""
        self.proc.send_signal(signal.SIGSTOP if frozen else signal.SIGCONT)
