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

"""Which agent owns which node: a consistent hash ring over the live members.  Pure.

The ring is tooz's (a pure data structure; the coordination backends live in
membership.py).  Partitions per member and the hash are options; sha256 by
default so it runs under FIPS.  1024 partitions per member by default: more
partitions even out the load between members and keep the nodes a membership
change moves close to the ideal 1/M (``tox -e bench -- ring`` prints both).

In the standalone agent a provider is keyed by node, not by agent, so
ownership is the ring's alone: any owner writes the same provider, and a
rebalance moves only the duty to sync, never a provider.
"""

import collections

from tooz import hashring

DEFAULT_PARTITIONS = 1024


class Ring:
    def __init__(self, members, partitions=DEFAULT_PARTITIONS, hash_function="sha256"):
        self.members = frozenset(members)
        if not self.members:
            raise ValueError("a ring needs at least one member")
        self._ring = hashring.HashRing(sorted(self.members), partitions=partitions,
                                       hash_function=hash_function)

    @property
    def hashring(self):
        """The tooz ring itself (what nova's driver asks ``get_nodes`` of)."""
        return self._ring

    def owner(self, node_uuid):
        (member,) = self._ring.get_nodes(node_uuid.encode())
        return member

    def loads(self, node_uuids):
        """Member -> how many of these nodes it owns (every member listed)."""
        counts = collections.Counter(self.owner(n) for n in node_uuids)
        return {m: counts.get(m, 0) for m in sorted(self.members)}


def balance(ring, node_uuids):
    """max/mean load over the members (1.0 is perfect)."""
    loads = ring.loads(node_uuids).values()
    return max(loads) / (sum(loads) / len(loads))


def movement(before, after, node_uuids):
    """Fraction of nodes whose owner differs between two rings."""
    node_uuids = list(node_uuids)
    return sum(before.owner(n) != after.owner(n) for n in node_uuids) / len(node_uuids)

