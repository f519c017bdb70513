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

"""Test hooks, not options: a test sets them in a nova-compute's environment to stop a
mover at one instant of a move and kill it there, or a build at one instant of its own
and cut or pause its service there (tests/nova_ha)."""

import logging
import os
import time

LOG = logging.getLogger(__name__)

# A test's hook, not an option: "STEP=SECONDS" pauses a mover that long right after the
# step STEP of each move (one of PAUSE_POINTS), so a test can kill it there; or after
# "fence decided" (the last reads before a fence), so a test can bring the service back
# just before it is forced down.
PAUSE_POINTS = ("forced down", "claim", "host", "action", "compute node record")
PAUSE_AFTER, _, _PAUSE_S = os.environ.get("RP_REPORTER_TEST_REHOME_PAUSE_AFTER",
                                          "").partition("=")


def pause_after(step, of="the move"):
    """The test hook's pause, after ``step`` of a move (or ``of`` a build; none unless
    it is asked)."""
    if step == PAUSE_AFTER:
        LOG.warning("test hook: pausing %s s after %s's step %r", _PAUSE_S, of, step)
        time.sleep(float(_PAUSE_S))
