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

"""The agent's side of the shared listing (listing_bus.Sharing, Sender) with a bus that
is a list: what a member keeps, what it drops and counts, and a lister that never
waits on the broker."""

import threading
import time

import pytest

from rp_reporter import conf as rp_conf
from rp_reporter import ring as rp_ring
from rp_reporter.agent import listing_bus
from rp_reporter.sync import listing_messages as lm
from rp_reporter.sync import shared_listing
from tools.wait import wait_for

MEMBERS = ("agent-0", "agent-1", "agent-2")
KEY = "group-secret"


class Bus:
    """Records casts; ``block`` makes every cast hang (a broker that does not answer)."""

    def __init__(self, block=None):
        self.cast_to = []
        self.block = block

    def serve(self, endpoint):
        self.endpoint = endpoint

    def cast(self, member, method, message):
        if self.block is not None:
            self.block.wait()
        self.cast_to.append((member, method, message))

    def stop(self):
        pass

    def wait(self):
        pass


class Ownership:
    def __init__(self, members=MEMBERS):
        self.ring = rp_ring.Ring(members)


def make_conf(tmp_path, host, **reconcile):
    reconcile = {"shared_listing_keys": KEY, "interval": 60, **reconcile}
    path = tmp_path / f"{host}.conf"
    path.write_text(f"[DEFAULT]\nhost = {host}\n[reconcile]\n"
                    + "".join(f"{k} = {v}\n" for k, v in reconcile.items()))
    return rp_conf.load(["--config-file", str(path)])


def sharing(tmp_path, host, bus=None, **reconcile):
    dropped = []
    made = listing_bus.Sharing(make_conf(tmp_path, host, **reconcile), Ownership(),
                               lambda: (), bus=bus or Bus(),
                               dropped=lambda kind, reason: dropped.append((kind, reason)),
                               deployment="dep-1")
    made.dropped = dropped
    return made.start()


def lister_host():
    return shared_listing.lister(rp_ring.Ring(MEMBERS))


def members_of_lister():
    return [m for m in MEMBERS if m != lister_host()]


def one_listing(tmp_path, nodes=30, **reconcile):
    """The lister's casts of one listing of ``nodes`` nodes, once its sender sent them."""
    lister = sharing(tmp_path, lister_host(), **reconcile)
    tee = lister.tee()
    uuids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(nodes)]
    for uuid in uuids:
        tee.add({"uuid": uuid, "traits": []})
    tee.finish({u: (u, 1) for u in uuids}, None)
    wait_for(lister.sender._queue.empty, 5, "every cast taken to be sent",
             interval=0.01)
    time.sleep(0.1)  # the last cast taken, sent
    return lister._bus.cast_to, uuids


def deliver(member, casts):
    for to, method, message in casts:
        if to == member.conf.host:
            getattr(member._bus.endpoint, method)({}, message=message)


def test_a_signed_slice_from_the_lister_is_taken(tmp_path):
    casts, uuids = one_listing(tmp_path)
    member = sharing(tmp_path, members_of_lister()[0])
    deliver(member, casts)
    listing = member.take()
    mine = {u for u in uuids if Ownership().ring.owner(u) == member.conf.host}
    assert {r["uuid"] for r in listing.records} == mine
    assert set(listing.providers) == mine
    assert member.dropped == []


def test_a_slice_signed_with_another_key_is_dropped_counted_and_logged_once(tmp_path, caplog):
    casts, _ = one_listing(tmp_path, shared_listing_keys="not-the-groups")
    member = sharing(tmp_path, members_of_lister()[0])
    deliver(member, casts)
    deliver(member, casts)
    assert member.take() is None
    assert member.dropped and all("none of the group's keys" in r for _, r in member.dropped)
    assert len([r for r in caplog.records if "dropped" in r.getMessage()]) == 2  # page, end


def test_a_slice_from_a_member_that_is_not_the_lister_is_dropped(tmp_path):
    impostor = members_of_lister()[1]
    member = sharing(tmp_path, members_of_lister()[0])
    context = member.context(member.ownership.ring).as_dict()
    listing_id = (time.time(), impostor, 1)
    for message in (lm.page_message(listing_id, context, 0, [{"uuid": "ghost"}]),
                    lm.end_message(listing_id, context, 1, None, 1.0)):
        member.received(message["kind"], lm.sign(message, [KEY]))
    assert member.take() is None
    assert [reason for _, reason in member.dropped] == [
        f"{impostor!r} is not the lister of its ring"] * 2


@pytest.mark.parametrize("message", [None, 5, "text", [], {}, {"v": 2, "kind": "end"},
                                     {"listing_id": ["x", None, 1]}])
def test_garbage_on_either_endpoint_is_dropped_never_raised(tmp_path, message):
    member = sharing(tmp_path, members_of_lister()[0])
    member._bus.endpoint.listing_page({}, message=message)
    member._bus.endpoint.listing_end({}, message=message, unexpected="argument")
    member._bus.endpoint.listing_end({})  # no argument at all
    assert len(member.dropped) == 3
    assert member.take() is None


def test_a_slice_cut_with_other_ring_options_is_refused_naming_them(tmp_path):
    casts, _ = one_listing(tmp_path, nodes=10)
    # Same key, same members, but the member's [ring] partitions differ from the lister's.
    member = sharing(tmp_path, members_of_lister()[0])
    member.conf.set_override("partitions", 512, group="ring")
    deliver(member, casts)
    assert member.take() is None
    assert "partitions" in member.refused


def test_the_lister_hands_casts_to_a_sender_and_never_waits_for_the_broker(tmp_path):
    hung = threading.Event()  # never set: every cast hangs
    lister = sharing(tmp_path, lister_host(), bus=Bus(block=hung))
    tee = lister.tee()
    started = time.monotonic()
    for i in range(100000):  # far more pages than the send queue holds
        tee.add({"uuid": f"00000000-0000-0000-0000-{i:012d}", "traits": []})
    tee.finish({}, None)
    assert time.monotonic() - started < 10  # the pass went on
    assert lister.sender.failures == len(members_of_lister())  # each member falls back
    assert lister.casts.down_since is not None  # and /healthz says so
    hung.set()


def test_a_members_wait_is_bounded_by_configuration(tmp_path):
    member = sharing(tmp_path, members_of_lister()[0], shared_listing_wait=5)
    member.listing_seconds = 1e9 / 2  # what a forged end once made it wait
    assert member.wait_seconds() == 60  # one interval by default
    member.conf.set_override("shared_listing_wait_max", 12, group="reconcile")
    assert member.wait_seconds() == 12


def test_a_members_wait_ends_at_its_bound_however_long_pages_keep_coming(tmp_path):
    member = sharing(tmp_path, members_of_lister()[0], shared_listing_wait_max=0.3)
    member.arriving = lambda begun_by: True  # the lister's pages keep coming, no end
    member.listing_seconds = 1e9
    started = time.monotonic()
    assert member.slice(True, threading.Event(), threading.Event()) is None
    assert time.monotonic() - started < 0.3 + 1.5  # the bound and a heartbeat at most


def test_a_member_asked_to_stop_while_waiting_stops_waiting(tmp_path):
    member = sharing(tmp_path, members_of_lister()[0])
    member.arriving = lambda begun_by: True
    stopping = threading.Event()
    threading.Timer(0.2, stopping.set).start()
    started = time.monotonic()
    assert member.slice(True, stopping, threading.Event()) is None
    assert time.monotonic() - started < 0.2 + 1.5


def test_no_page_is_larger_than_a_megabyte_whatever_the_slice(tmp_path):
    """At 5x10^4 providers the old end message was about 4 MiB."""
    ring = rp_ring.Ring(MEMBERS)
    splitter = shared_listing.Splitter(ring, lister_host())
    uuids = [f"00000000-0000-0000-0000-{i:012d}" for i in range(60000)]
    pages = []
    for uuid in uuids:
        pages += splitter.add({"uuid": uuid, "properties": {"blob": "x" * 300}})
    more, _ = splitter.finish({u: (u, 1) for u in uuids}, None)
    pages += more
    context = shared_listing.Context(MEMBERS, (None, None), ("uuid",), (1024, "sha256"), "d")
    largest = max(lm.size(lm.sign(lm.page_message((1.0, "a", 1), context.as_dict(), seq,
                                                  records, providers), [KEY]))
                  for _, seq, records, providers in pages)
    assert largest <= lm.MAX_MESSAGE_BYTES, largest
