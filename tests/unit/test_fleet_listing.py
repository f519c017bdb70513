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

"""rp_reporter.fleet_listing: the fleet listed again only where it changed (pure).

The property test runs an Ironic whose writers' clock and ours are each off by up to
half the slack, with writes landing while a listing reads its pages (a node is read at
its place in the listing's order, before or after its write).
"""

import dataclasses
import datetime

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from rp_reporter import fleet_listing

EPOCH = datetime.datetime(2026, 11, 28, tzinfo=datetime.timezone.utc)
FULL_EVERY = 600.0


@dataclasses.dataclass
class Node:
    id: str
    version: int
    created_at: str
    updated_at: str = None


def at(seconds):
    return (EPOCH + datetime.timedelta(seconds=seconds)).isoformat()


def test_a_time_stamp_as_ironic_writes_it():
    assert fleet_listing.stamp("2026-11-28T03:40:00+00:00") == EPOCH.replace(hour=3, minute=40)
    assert fleet_listing.stamp("2026-11-28T03:40:00.5Z").microsecond == 500000
    assert fleet_listing.stamp("2026-11-28T03:40:00").tzinfo is not None  # taken as UTC
    assert fleet_listing.stamp(None) is None and fleet_listing.stamp("") is None


def test_ironics_clock_is_the_date_of_its_answer():
    assert fleet_listing.http_date("Sat, 28 Nov 2026 03:40:00 GMT") == EPOCH.replace(hour=3,
                                                                                   minute=40)
    # eventlet's WSGI server writes -0000, which the standard library reads as no zone
    assert fleet_listing.http_date("Sat, 28 Nov 2026 03:40:00 -0000") == EPOCH.replace(
        hour=3, minute=40)
    assert fleet_listing.http_date(None) is None and fleet_listing.http_date("soon") is None


def test_a_sorted_listing_reads_on_while_its_last_node_is_recent_enough():
    since = fleet_listing.stamp(at(100))
    page = [Node("a", 0, at(0), at(150)), Node("b", 0, at(0), at(100))]
    assert fleet_listing.read_on(page, "updated_at", since)
    assert not fleet_listing.read_on(page[:1] + [Node("c", 0, at(0), at(99))], "updated_at", since)
    assert not fleet_listing.read_on([Node("c", 0, at(0))], "updated_at", since)  # never updated
    assert not fleet_listing.read_on([], "updated_at", since)


def later(seconds):
    return EPOCH + datetime.timedelta(seconds=seconds)


def test_the_whole_fleet_is_listed_first_and_once_a_full_pass():
    view = fleet_listing.FleetView(FULL_EVERY)
    assert view.full_due(0)
    view.took_full([Node("a", 0, at(0))], 10.0, [EPOCH, None])
    assert not view.full_due(10.0 + FULL_EVERY - 1)
    assert view.full_due(10.0 + FULL_EVERY)


def test_since_is_the_listings_start_on_the_earlier_clock_less_the_slack():
    view = fleet_listing.FleetView(FULL_EVERY, slack_s=60)
    view.took_full([Node("a", 0, at(0), at(1000))], 0.0, [later(2000), later(1500)])
    assert view.since == later(1500 - 60)  # Ironic's clock earlier
    view.took_changes([], [later(500), later(900)])
    assert view.since == later(500 - 60)  # ours earlier
    view.took_changes([], [later(700), None])  # Ironic's Date missing: ours alone
    assert view.since == later(700 - 60)


def test_since_moves_on_however_long_ago_the_fleet_was_last_written():
    """A thousand nodes enrolled together and nothing written since: the listings of
    what changed read them once, not at every refresh."""
    view = fleet_listing.FleetView(FULL_EVERY, slack_s=60)
    enrolled = [Node(f"n{i}", 0, at(0)) for i in range(1000)]
    view.took_full(enrolled, 0.0, [later(5), later(5)])
    view.took_changes([], [later(120), later(121)])
    assert not fleet_listing.read_on(enrolled[-1:], "created_at", view.since)


class Ironic:
    """Nodes and their writes, each stamped by its writer's clock (``skew_of(uuid)``
    ahead of real time)."""

    def __init__(self, skew_of):
        self.skew_of = skew_of
        self.history = {}  # uuid: [(real time, version or None: deleted)]

    def write(self, uuid, now, deleted=False):
        history = self.history.setdefault(uuid, [])
        if history and history[-1][1] is None:
            return  # deleted: Ironic does not bring a uuid back
        history.append((now, None if deleted else len(history)))

    def as_of(self, uuid, now):
        """The node ``uuid`` as read at real time ``now`` (None: absent)."""
        writes_ = [(t, v) for t, v in self.history.get(uuid, ()) if t <= now]
        if not writes_ or writes_[-1][1] is None:
            return None
        skew = self.skew_of(uuid)
        (created, _), (updated, version) = writes_[0], writes_[-1]
        return Node(uuid, version, at(created + skew), at(updated + skew) if version else None)


writes = st.lists(st.tuples(st.integers(0, 11), st.floats(0, 1), st.booleans()), max_size=6)
steps = st.lists(st.tuples(st.floats(0.1, 300), writes, st.floats(0, 120)), min_size=1,
                 max_size=12)
SLACK = 60
near = st.floats(-SLACK / 2 + 1, SLACK / 2 - 1)  # two clocks within the slack
far = st.floats(-3600, 3600)


@st.composite
def clocks(draw):
    """(each node's writer's skew, Ironic API's, ours): Ironic's writers agree (a
    writer ahead of them, of every third node, only stamps later), and one of the two
    clocks a listing reads, Ironic API's or ours, is anywhere."""
    base, writers = draw(far), draw(near)
    ahead = draw(st.sampled_from([0, SLACK + 1, 3600]))
    wild = draw(st.sampled_from(["api", "ours"]))
    api, ours = (draw(far if wild == name else near) for name in ("api", "ours"))
    return ((lambda uuid: base + writers + (ahead if int(uuid[1:]) % 3 == 0 else 0)),
            base + api, base + ours)


@settings(max_examples=500, deadline=None)
@given(steps, clocks())
def test_every_write_before_a_listing_starts_is_in_the_view_once_it_ends(refreshes, clocks_):
    """Each refresh: a pause, then writes that land while the listing reads (each at its
    fraction of the listing, a node read at its place in the listing's order), each a
    node's update, creation or deletion.  After a listing, every node's version written
    before the listing started is the view's: none missed, none stale, none resurrected;
    a deleted node only lingers until the next whole listing."""
    skew_of, api_skew, our_skew = clocks_
    ironic = Ironic(skew_of)
    view = fleet_listing.FleetView(FULL_EVERY, slack_s=SLACK)
    order = [f"n{i:02}" for i in range(12)]
    now = 0.0
    for uuid in order[:6]:
        ironic.write(uuid, now)
    for pause, landing, took in refreshes:
        now += pause
        start = now
        for index, fraction, deleted in sorted(landing, key=lambda w: w[1]):
            ironic.write(order[index], start + fraction * took, deleted)
        # each node read at its place in the listing's order
        read = [ironic.as_of(uuid, start + took * i / len(order)) for i, uuid in enumerate(order)]
        read = [node for node in read if node is not None]
        clocks_at_start = [later(start + our_skew), later(start + api_skew)]
        full = view.full_due(start)
        if full:  # as nova asks: some fields, no time stamps
            view.took_full([dataclasses.replace(n, created_at=None, updated_at=None)
                            for n in read], start, clocks_at_start)
        else:
            changed = [n for n in read if fleet_listing.stamp(n.updated_at or n.created_at)
                       >= view.since]
            view.took_changes(changed, clocks_at_start)
        now = start + took
        for uuid in order:
            before, held = ironic.as_of(uuid, start), view.nodes.get(uuid)
            history = ironic.history.get(uuid, [])
            if before is None:
                # not there when the listing started: held only if created meanwhile, or
                # deleted earlier and the listing not whole (a whole one sees it go)
                if held is not None:
                    assert history[-1][1] is not None or history[-1][0] >= start or not full
            elif ironic.as_of(uuid, now) is None:
                # deleted by the listing's end: a listing of changes does not see it go,
                # a whole one read it before or after
                assert held is None or not full or held.version >= before.version, uuid
            else:
                assert held is not None and held.version >= before.version, (uuid, before, held)
