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

"""Who was ever a member of the compute services' group, and whom a mover forced down.

Live membership is the coordination backend's: a lease, gone with the backend's data
or a lease's end.  What a mover may fence must outlive both: only a service that was a
member of this group is ever forced down by it, never a stock nova-compute or one of
another group sharing the cell (forced down, the scheduler skips it after it recovers
and its deletes become local deletes that leave Ironic nodes deployed).  And a service
that comes back clears only a forced-down flag a mover set, never an operator's or an
evacuation tool's.

Both live in nova's own database, as a host aggregate of the group's: its hosts are the
services that ever joined, each ``rp_reporter_forced_down:<host>`` key names the mover
that forced that host down.  It carries no scheduling metadata (no availability zone,
no filter key), so no scheduler filter reads it; ``openstack aggregate show`` shows it
to an operator, who removes a host that was decommissioned.
"""

from nova import exception
from nova import objects

GROUP_KEY = "rp_reporter_compute_group"
FORCED_DOWN_KEY = "rp_reporter_forced_down:"
NAME = "rp-reporter-compute-{group}"


class GroupRecord:
    """The aggregate of coordination group ``group`` (made by its first member)."""

    def __init__(self, group):
        self.group = group

    def _aggregate(self, ctxt, create=False):
        found = objects.AggregateList.get_by_metadata(ctxt, key=GROUP_KEY, value=self.group)
        if found:
            # Read again whole: nova's search by metadata carries only the matching key.
            return objects.Aggregate.get_by_id(ctxt, found[0].id)
        if not create:
            return None
        aggregate = objects.Aggregate(context=ctxt, name=NAME.format(group=self.group),
                                      metadata={GROUP_KEY: self.group})
        try:
            aggregate.create()
        except exception.AggregateNameExists:  # another member made it meanwhile
            return self._aggregate(ctxt)
        return aggregate

    def join(self, ctxt, host):
        """Record ``host`` as a member (idempotent)."""
        aggregate = self._aggregate(ctxt, create=True)
        if host not in (aggregate.hosts or []):
            try:
                aggregate.add_host(host)
            except exception.AggregateHostExists:
                pass

    def members(self, ctxt):
        """Every host ever recorded, lower-case as nova compares hosts."""
        aggregate = self._aggregate(ctxt)
        return {host.lower() for host in (aggregate.hosts or [])} if aggregate else set()

    def forced_down(self, ctxt, host, mover):
        """``mover`` forces ``host`` down: recorded before the flag is set."""
        self._aggregate(ctxt, create=True).update_metadata({FORCED_DOWN_KEY + host: mover})

    def forced_down_by_mover(self, ctxt, host):
        """The mover that forced ``host`` down, or None (not forced by a mover)."""
        aggregate = self._aggregate(ctxt)
        return aggregate.metadata.get(FORCED_DOWN_KEY + host) if aggregate else None

    def cleared(self, ctxt, host):
        """``host``'s forced-down flag was cleared: its mover's key goes."""
        aggregate = self._aggregate(ctxt)
        if aggregate is not None:
            aggregate.update_metadata({FORCED_DOWN_KEY + host: None})
