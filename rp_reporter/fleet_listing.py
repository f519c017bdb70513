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

"""The fleet as nova's node refresh sees it, listed again only where it changed.  Pure.

nova's Ironic driver lists the whole fleet (its shard, its conductor group) at every
node refresh: each periodic of each service, and each build's question.  At 10,000
nodes that listing is most of a quiet periodic (doc/performance.md, "nova at fleet
size").  With ``[rp_reporter] full_pass_every`` above 1 the driver keeps the fleet it
last listed and, at a refresh, lists only:

* the nodes updated since the last listing: Ironic's list sorted by ``updated_at``,
  newest first, read until a node updated before ``since``;
* the nodes created since and never updated (Ironic leaves ``updated_at`` empty until a
  node's first update): the same, sorted by ``created_at``;
* and the whole fleet once a full pass has gone by (``full_every_s``, as long as
  nova's own look at every node takes to come round): the only listing that sees a node
  deleted from Ironic, or moved out of the shard or conductor group, and the one the
  service starts with.

``since`` is on two clocks, the earlier of the two less ``SLACK_S``: the newest time
stamp Ironic wrote that a listing saw (Ironic's clock, pushed back by how long the
listing took, as a node on its first page may be written while the last is read), and
the wall clock at the listing's start (ours).  A write is missed only when both are
ahead of Ironic's writer by more than the slack, and even then only until the next
full listing.
"""

import datetime

# Ironic's hosts' clocks and ours agree within this, and a write commits within it of
# its time stamp (Ironic stamps a row before the transaction ends).
SLACK_S = 60.0


def stamp(value):
    """An Ironic time stamp (ISO 8601, as its API returns it) as an aware datetime,
    or None."""
    if not value:
        return None
    if isinstance(value, datetime.datetime):
        parsed = value
    else:
        parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def newest_stamp(node):
    """When Ironic last wrote ``node``: its ``updated_at``, else its ``created_at``."""
    return stamp(getattr(node, "updated_at", None)) or stamp(getattr(node, "created_at", None))


def read_on(page, key, since):
    """Whether a listing sorted by ``key`` (a time stamp), newest first, goes on after
    ``page`` (a whole page): its last node was written at or after ``since``."""
    last = stamp(getattr(page[-1], key, None)) if page else None
    return last is not None and last >= since


class FleetView:
    """The nodes of the fleet as last listed (by uuid), and what to list next."""

    def __init__(self, full_every_s, slack_s=SLACK_S):
        self.full_every_s = full_every_s
        self.slack_s = slack_s
        self.nodes = {}
        self.since = None  # nodes written at or after it are listed again
        self._full_at = None  # (monotonic) the start of the last full listing
        self._newest = None  # the newest time stamp any listing saw

    def full_due(self, now):
        """Whether the next listing lists the whole fleet (``now``: monotonic)."""
        return self._full_at is None or now - self._full_at >= self.full_every_s

    def took_full(self, nodes, started, wall_started, took_s, stamped=()):
        """A listing of the whole fleet, started at ``started`` (monotonic) and
        ``wall_started`` (aware UTC), that took ``took_s``: the fleet is its nodes.
        Ironic's list leaves out the time stamps when asked for some fields only (as
        nova asks): ``stamped``, nodes read with theirs meanwhile, tell Ironic's clock."""
        self.nodes = {node.id: node for node in nodes}
        self._full_at = started
        self._advance([*self.nodes.values(), *stamped], wall_started, took_s)

    def took_changes(self, nodes, wall_started, took_s):
        """A listing of the nodes written since ``since``: each replaces its old self."""
        nodes = list(nodes)
        self.nodes.update((node.id, node) for node in nodes)
        self._advance(nodes, wall_started, took_s)

    def _advance(self, nodes, wall_started, took_s):
        newest = max(filter(None, map(newest_stamp, nodes)), default=None)
        if newest is not None and (self._newest is None or newest > self._newest):
            self._newest = newest
        took = datetime.timedelta(seconds=took_s)
        bounds = [wall_started] + ([self._newest - took] if self._newest else [])
        self.since = min(bounds) - datetime.timedelta(seconds=self.slack_s)
