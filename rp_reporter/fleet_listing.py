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
nodes that listing is most of a quiet periodic
(doc/source/contributor/performance.md, "nova at fleet size").  With ``[rp_reporter]
full_pass_every`` above 1 the driver keeps the fleet it
last listed and, at a refresh, lists only:

* the nodes updated since the last listing: Ironic's list sorted by ``updated_at``,
  newest first, read until a node updated before ``since``;
* the nodes created since and never updated (Ironic leaves ``updated_at`` empty until a
  node's first update): the same, sorted by ``created_at``;
* and the whole fleet once a full pass has gone by (``full_every_s``, as long as
  nova's own look at every node takes to come round): the only listing that sees a node
  deleted from Ironic, or moved out of the shard or conductor group, and the one the
  service starts with.  After the start the driver makes it beside nova's periodic, not
  in it (``nova_compute.node_listing``), and takes it at the next refresh.

``since`` is the listing's start on two clocks, the earlier of the two, less
``SLACK_S``: Ironic's (the ``Date`` of its first answer) and ours.  A node written
after a listing started carries a time stamp at or after that start on its writer's
clock, so it is read by the next listing unless both clocks are ahead of that
writer's by more than the slack; even then, only until the next whole listing.
(Time stamps seen in the listings are no clock: after a node was enrolled with a
thousand others and nothing written since, they would hold ``since`` there, and every
listing would read the thousand again.)
"""

import datetime
import email.utils

from oslo_utils import timeutils

# Ironic's hosts' clocks and ours agree within this, and a write commits within it of
# its time stamp (Ironic stamps a row before the transaction ends).
SLACK_S = 60.0


def _utc(parsed):
    """An aware datetime: one without a zone is UTC (Ironic's stamps; a Date of -0000)."""
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def stamp(value):
    """An Ironic time stamp (ISO 8601, as its API returns it) as an aware datetime,
    or None.  (oslo.utils' parser, as Ironic's own: Python 3.9 and 3.10's
    fromisoformat refuse a fraction of other than 3 or 6 digits.)"""
    if not value:
        return None
    return _utc(timeutils.parse_isotime(str(value)))


def http_date(value):
    """An HTTP ``Date`` header (Ironic's clock when it answered) as an aware datetime,
    or None."""
    try:
        return _utc(email.utils.parsedate_to_datetime(value)) if value else None
    except (TypeError, ValueError):
        return None


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
        self.full_at = None  # (monotonic) the start of the whole listing taken last

    def full_due(self, now):
        """Whether the next listing lists the whole fleet (``now``: monotonic)."""
        return self.full_at is None or now - self.full_at >= self.full_every_s

    def took_full(self, nodes, started, clocks):
        """A listing of the whole fleet, started at ``started`` (monotonic) and at
        ``clocks`` (aware datetimes: ours, Ironic's when it answered): the fleet is its
        nodes."""
        self.nodes = {node.id: node for node in nodes}
        self.full_at = started
        self._advance(clocks)

    def took_changes(self, nodes, clocks):
        """A listing of the nodes written since ``since``, started at ``clocks``: each
        replaces its old self."""
        self.nodes.update((node.id, node) for node in nodes)
        self._advance(clocks)

    def _advance(self, clocks):
        self.since = min(filter(None, clocks)) - datetime.timedelta(seconds=self.slack_s)
