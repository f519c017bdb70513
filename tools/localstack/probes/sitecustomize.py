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

"""The upcall probe of the test stack's cell conductors, loaded at their interpreter's
start (``PYTHONPATH``: ``nova.start_cell_conductor``).

A cell conductor has no ``[api_database]`` (nova's superconductor layout), so a call
of a compute service that needs the API database fails there, in oslo.db, as its engine
cannot start.  nova's conductor wraps an object method's error in oslo.messaging's
ExpectedException, which the RPC server logs at DEBUG only, and the caller may reword
the error or log nothing: a count of the callers' lines misses those.  Here each such
failure is logged at WARNING as UPCALL, whoever made the call, so a count of that line
in the conductor's log is every upcall (the HA suite stages one to see it counted)."""

import functools
import logging

UPCALL = "test stack probe: an upcall refused (this cell conductor has no API database)"


def _probe():
    try:
        from oslo_db import exception
        from oslo_db.sqlalchemy import enginefacade
    except ImportError:  # not a process of nova's: nothing to watch
        return
    start = enginefacade._TransactionFactory._start

    @functools.wraps(start)
    def probed(self, *args, **kwargs):
        try:
            return start(self, *args, **kwargs)
        except exception.CantStartEngineError:
            logging.getLogger("rp_reporter.test_stack.probe").warning(UPCALL)
            raise
    enginefacade._TransactionFactory._start = probed


if __name__ == "sitecustomize":  # at an interpreter's start, not when a test reads UPCALL
    _probe()
