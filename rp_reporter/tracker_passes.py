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

"""Which nodes nova's resource-tracker periodic goes over.  Pure.

nova's ``update_available_resource`` periodic goes over every node a compute service
manages, each under the resource tracker's lock: at 1,000 nodes per service that is
about a minute of nova's work every interval (doc/performance.md, "nova at fleet
size"), while for a node nothing happened to it only re-reads what it wrote last time.
Where rp_reporter's agents keep each node's provider right, the driver can give that
periodic only the nodes that need nova's own look, with ``[rp_reporter]
full_pass_every`` N above 1:

* a node nova's resource tracker has not looked at since this service took it (every
  node at the service's start, each node a takeover or a ring change brings here);
* a node whose fields nova reads from Ironic changed since nova's last look at it
  (an instance arriving or going, a state, maintenance, a class, properties, traits);
* and every node, once in N periodics: the full pass keeps nova's own repairs (stale
  allocations, its traits, the compute node record) going at a slower pace.

N = 1 is nova's behaviour: every node, every periodic.
"""


class TrackerPasses:
    """What each periodic is given: ``nodes(managed)`` once per periodic, with the
    fingerprint of each node this service manages now ({uuid: fingerprint}: the values
    of the fields nova reads, hashable)."""

    def __init__(self, full_pass_every):
        self.full_pass_every = max(1, full_pass_every)
        self.periodics = 0
        self._looked_at = {}  # uuid: its fingerprint when nova's periodic was last given it

    @property
    def enabled(self):
        return self.full_pass_every > 1

    def nodes(self, managed):
        """(the nodes this periodic goes over, whether it is a full pass)."""
        full = self.periodics % self.full_pass_every == 0
        self.periodics += 1
        due = [uuid for uuid, seen in managed.items()
               if full or self._looked_at.get(uuid, _NEVER) != seen]
        # Every managed node is now as nova last looked at it (the quiet ones unchanged);
        # a node no longer managed is forgotten, so it is due again if it comes back.
        self._looked_at = dict(managed)
        return due, full

    def forget(self, released):
        """Nodes this service stopped managing between two periodics (a ring change seen
        by the renewals): due again if they come back before the next periodic, since
        another service's resource tracker may have taken their records meanwhile."""
        for uuid in released:
            self._looked_at.pop(uuid, None)

    def until_full(self):
        """Periodics from now until the next full pass (0: the next one)."""
        return -self.periodics % self.full_pass_every


_NEVER = object()
