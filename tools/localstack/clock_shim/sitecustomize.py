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

"""A pause hidden from a process's clocks, as a VM pause hides itself from the guest
(its monotonic clock stops too), for the HA suite's stories: loaded at the start of an
interpreter whose PYTHONPATH names this folder, where RP_TEST_CLOCK_OFFSET_FILE names a
file, ``time.time`` and ``time.monotonic`` (and their ``_ns``) read the system's clocks
less the file's number of seconds.  A test pauses the process (SIGSTOP), writes the
pause's length there, and resumes it: what the process reads of time then goes on from
where it stopped.  With RP_TEST_CLOCK_STEP set, ``time.time`` alone is shifted: a step
of the wall clock (-3600 in the file steps it an hour ahead), the monotonic clock goes
on.

Not libfaketime: Debian's 0.9.10 fakes CLOCK_MONOTONIC in C, and Python 3.11's
``threading.Event.wait(0.5)`` never returned under it (with or without
FAKETIME_FORCE_MONOTONIC_FIX); only what Python code reads of time is shifted here,
the C library's own timed waits are not, as in a guest whose timers stood still."""

import os
import time


def _shift(path, realtime_only=False):
    real = {name: getattr(time, name)
            for name in ("time", "monotonic", "time_ns", "monotonic_ns")}
    read = {"offset": 0.0, "at": float("-inf")}

    def offset():
        now = real["monotonic"]()
        if now - read["at"] >= 0.1:  # read again at most ten times a second
            try:
                with open(path) as f:
                    read["offset"] = float(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            read["at"] = now
        return read["offset"]

    time.time = lambda: real["time"]() - offset()
    time.time_ns = lambda: real["time_ns"]() - int(offset() * 1e9)
    if realtime_only:  # a step of the wall clock (NTP, ``date``): monotonic goes on
        return
    time.monotonic = lambda: real["monotonic"]() - offset()
    time.monotonic_ns = lambda: real["monotonic_ns"]() - int(offset() * 1e9)


if __name__ == "sitecustomize" and os.environ.get("RP_TEST_CLOCK_OFFSET_FILE"):
    _shift(os.environ["RP_TEST_CLOCK_OFFSET_FILE"],
           realtime_only=bool(os.environ.get("RP_TEST_CLOCK_STEP")))
