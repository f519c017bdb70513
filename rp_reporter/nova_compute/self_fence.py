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

"""Self-fencing: a compute service that may have been fenced stops acting at once.

A survivor moves a service's servers only once the service's lease ended and nova
reports it down, and it forces the service down before the first move (nova's fence).
The service may still be alive: paused (SIGSTOP, a VM pause, a stalled process) or cut
off, and it resumes with threads in flight: a deploy polling Ironic, a delete waiting
for cleaning, a request nova's manager took.  Any of them may write after the move:
nova's save after a spawn, its build-failure handler clearing a server's host, node and
ports, a driver's request to Ironic.

So, as Pacemaker's watchdog stops a node that lost quorum and a Kubernetes lease holder
stops acting once its lease is gone, the service does not trust its threads after a
lapse of its lease (by its own clock, or by the backend's word: it was no longer a
member).  Every place where it acts asks ``check`` first: each driver operation, each
of the driver's requests to Ironic (the polls of a deploy or a delete included), each
request nova's manager takes, each membership renewal.  After a lapse, ``check`` reads
the service's own Service record (nova's cell database, through nova-conductor); forced
down, a mover may have moved servers meanwhile, and the service restarts itself in
place before anything is written: nova's own start-up handling then runs on the servers
still homed here, as after any restart.  Not forced down, nothing was moved (a mover
forces down first), and it goes on.  While the lease is lapsed and not renewed yet (a
partition, or the instant after a pause before the renewal thread ran) every check
reads the record again: a mover forces a service down right before it moves its
servers, so an answer a moment old says nothing of now.  Unknown is not "go": a record
that cannot be read after a lapse (the service cut off from nova-conductor as well)
restarts the service as a forced-down one would, and nova's own start-up then waits
for the conductor before it acts on anything.
"""

import logging
import multiprocessing
import os
import sys
import threading

LOG = logging.getLogger(__name__)


def restart_in_place(why):
    """Restart this nova-compute now, writing nothing more.  Under oslo.service's
    process manager (nova 34 on: the service runs in a worker process) the worker
    exits and the manager starts a new one; otherwise (eventlet, nova 31 to 33) the
    process runs its own command again, with the same pid (a service manager sees no
    exit)."""
    LOG.critical("self-fenced: %s; this compute service restarts now, before it writes "
                 "anything more (nova's start-up handling then runs on the servers still "
                 "homed here)", why)
    for handler in logging.getLogger().handlers:
        handler.flush()
    if multiprocessing.parent_process() is not None:
        os._exit(1)
    # its own command line, as it was started: no shell, nothing from outside
    os.execv(sys.executable, own_command())  # noqa: S606


def own_command():
    """This process's command line as it was started: sys.orig_argv (Python 3.10 on),
    else the interpreter and sys.argv, which is how a console script such as
    nova-compute starts (2025.1's nova also runs on 3.9)."""
    started = getattr(sys, "orig_argv", None)
    return [sys.executable, *(started[1:] if started else sys.argv)]


class SelfFence:
    """``membership``: the service's Group (``fenced``, ``lapses``, ``heartbeat``);
    ``forced_down``: () -> whether nova has this service forced down now (a read of its
    own Service record); ``restart``: what is done when it is (``restart_in_place``)."""

    def __init__(self, membership, forced_down, restart=restart_in_place, read_within=None):
        self.membership = membership
        self._forced_down = forced_down
        self._restart = restart
        # a read of the record that does not answer within this (nova's
        # rpc_response_timeout: the call's own bound) is a failed read, not a wait: a bus
        # cut off retries its connection without end, and the thread would hold the
        # check's lock (every thread stopped, none restarting) until the bus is back
        self._read_within = read_within
        self._cleared = membership.lapses  # the lapses found harmless (or none yet)
        self._lock = threading.Lock()

    def check(self, what, confirm=False):
        """Before this service acts (``what``, for the log): returns when it may act;
        restarts it when it may have been fenced (never returns then, in production).
        ``confirm``, before a write: the backend is asked whether it still has this
        member, since a pause that its clocks did not see (a VM pause hides itself from
        the guest's clocks) shows no lapse until the next renewal, a heartbeat later;
        a backend that does not answer leaves it to the lease's own clock."""
        if confirm and not self._lapsed():
            try:
                self.membership.confirm()
            except Exception:  # noqa: BLE001 - no word from the backend: no evidence
                LOG.debug("self-fence: the coordination backend did not confirm this "
                          "member (before %s)", what, exc_info=True)
        if not self._lapsed():
            return
        with self._lock:
            lapses, fenced = self.membership.lapses, self.membership.fenced
            if not fenced and lapses == self._cleared:
                return  # another thread found this lapse harmless meanwhile
            try:
                forced = self._read_forced_down()
            except Exception as e:  # noqa: BLE001 - any failure: the answer is unknown
                self._restart(f"the lease of its membership lapsed and its own service "
                              f"record could not be read ({type(e).__name__}: {e}); a "
                              f"mover may have forced it down and moved its servers "
                              f"(before {what})")
                return
            if forced:
                self._restart(f"the lease of its membership lapsed and nova has this "
                              f"service forced down (before {what})")
                return
            if not fenced:
                self._cleared = lapses

    def _read_forced_down(self):
        """The record's answer, or an error once ``read_within`` seconds passed."""
        if self._read_within is None:
            return self._forced_down()
        answer = {}

        def read():
            try:
                answer["forced"] = self._forced_down()
            except Exception as e:  # noqa: BLE001 - raised in the caller's thread
                answer["error"] = e
        reader = threading.Thread(target=read, name="rp_reporter-self-fence-read",
                                  daemon=True)
        reader.start()
        reader.join(self._read_within)
        if "error" in answer:
            raise answer["error"]
        if "forced" not in answer:
            raise TimeoutError(f"no answer within {self._read_within} s")
        return answer["forced"]

    def _lapsed(self):
        return self.membership.fenced or self.membership.lapses != self._cleared
