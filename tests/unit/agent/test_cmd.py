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

"""The agent's start: a process whose group's leader has exited leads its own group
(oslo.messaging's queue manager reads ``/proc/<pgrp>/stat``)."""

import os
import subprocess
import sys
import time

CHILD = """
import os, sys, time
from rp_reporter.agent import cmd
deadline = time.monotonic() + 10
while os.path.exists(f"/proc/{os.getpgrp()}") and time.monotonic() < deadline:
    time.sleep(0.05)  # until the shell that leads this group has exited
before = os.path.exists(f"/proc/{os.getpgrp()}")
cmd.lead_a_process_group()
print(before, os.getpgrp() == os.getpid(), os.path.exists(f"/proc/{os.getpgrp()}"))
"""


def test_an_agent_whose_group_leader_exited_leads_its_own_group(tmp_path):
    out = tmp_path / "out"
    out.write_text("")
    # A shell leads a new group, starts the child in the background and exits.
    subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$CHILD" >> "{out}" 2>&1 &'],
                   env=dict(os.environ, CHILD=CHILD), start_new_session=True, check=True)
    deadline = time.monotonic() + 20
    while not out.read_text(errors="replace").strip() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert out.read_text().split() == ["False", "True", "True"], out.read_text()


STAYS = """
import os
from rp_reporter.agent import cmd
group = os.getpgrp()
cmd.lead_a_process_group()
print(group != os.getpid(), os.path.exists(f"/proc/{group}"), os.getpgrp() == group)
"""


def test_an_agent_whose_group_has_a_leader_stays_in_it():
    # A shell leads a new group and waits for the child (two commands: no exec), so
    # the group's leader is alive whatever ran this test (a background job's may not be).
    done = subprocess.run(["sh", "-c", f'"{sys.executable}" -c "$CHILD"; exit $?'],
                          env=dict(os.environ, CHILD=STAYS), start_new_session=True,
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["True", "True", "True"], done.stdout + done.stderr
