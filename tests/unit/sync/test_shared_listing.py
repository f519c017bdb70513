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

"""The shared listing's pure part: who lists, slices cut by the ring, slices put
together again, and when a member must refuse one and list by itself."""

import json
import random
import uuid

from rp_reporter import ring as rp_ring
from rp_reporter.sync import shared_listing as sl

random.seed(7)
NODES = [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(1200)]
MEMBERS = ("agent-0", "agent-1", "agent-2")
RING = rp_ring.Ring(MEMBERS)
CONTEXT = sl.Context(MEMBERS, (None, "s1"), ("maintenance", "traits", "uuid"))


def record(uuid_):
    return {"uuid": uuid_, "maintenance": False, "traits": ["CUSTOM_X"]}


def providers():
    return {u: (u, i) for i, u in enumerate(NODES)}


def cut(me, page_records=100, page_providers=sl.PAGE_PROVIDERS):
    """Everything the lister sends, as it would cross the bus (JSON): ("page", member,
    seq, [records, providers]) and ("end", member, None, end)."""
    splitter = sl.Splitter(RING, me, page_records, page_providers=page_providers)
    sent = []
    for u in NODES:
        sent += [("page", m, seq, [r, p]) for m, seq, r, p in splitter.add(record(u))]
    pages, ends = splitter.finish(providers(), None)
    sent += [("page", m, seq, [r, p]) for m, seq, r, p in pages]
    sent += [("end", m, None, end) for m, end in ends.items()]
    return [json.loads(json.dumps(message)) for message in sent]


def feed(assembler, listing_id, context, message):
    """One message of cut() into the assembler."""
    kind, _, seq, body = message
    if kind == "page":
        records, providers_ = body
        assembler.page(list(listing_id), context, seq, records,
                       {u: tuple(p) for u, p in providers_.items()})
    else:
        assembler.end(list(listing_id), context, body)


def assemble(messages, member, listing_id=(1000.0, "agent-0", 1), context=CONTEXT, now=1010.0):
    assembler = sl.Assembler(max_age=60, clock=lambda: now)
    for message in messages:
        if message[1] == member:
            feed(assembler, listing_id, context, message)
    return assembler


def test_every_member_agrees_on_one_lister_among_the_members():
    assert sl.lister(RING) in MEMBERS
    assert sl.lister(rp_ring.Ring(reversed(MEMBERS))) == sl.lister(RING)


def test_each_member_gets_exactly_its_own_nodes_and_providers():
    messages = cut("agent-0")
    assert {m for _, m, _, _ in messages} == {"agent-1", "agent-2"}  # not the lister itself
    for member in ("agent-1", "agent-2"):
        listing = assemble(messages, member).take(CONTEXT)
        owned = {u for u in NODES if RING.owner(u) == member}
        records = list(listing.records)
        assert {r["uuid"] for r in records} == owned
        assert len(records) == len(owned)  # no record twice
        assert set(listing.providers) == owned
        assert all(listing.providers[u] == (u, NODES.index(u)) for u in owned)
        assert listing.listing_gap is None


def test_pages_arriving_in_any_order_make_the_same_slice():
    messages = cut("agent-0", page_records=7)
    in_order = assemble(messages, "agent-1").take(CONTEXT)
    random.shuffle(messages)
    shuffled = assemble(messages, "agent-1").take(CONTEXT)
    assert sorted(r["uuid"] for r in shuffled.records) == sorted(
        r["uuid"] for r in in_order.records)


def test_a_slices_pages_are_let_go_as_the_pass_reads_past_them():
    """A member never holds its slice's records whole beside what its pass builds."""
    messages = cut("agent-0", page_records=7)
    assembler = assemble(messages, "agent-1")
    kept = assembler._serving(CONTEXT)
    listing = assembler.take(CONTEXT)
    pages = listing.records.gi_frame.f_locals["pages"]
    total = len(pages)
    assert total > 2 and kept.pages == {}  # the assembler keeps none of them
    records = iter(listing.records)
    for _ in range(8):  # into the second page: the first is gone
        next(records)
    assert len(pages) == total - 2  # the first read, the second being read
    assert sum(1 for _ in records) + 8 == len({u for u in NODES
                                               if RING.owner(u) == "agent-1"})
    assert pages == {}


def test_a_slice_with_a_page_missing_is_never_used():
    messages = cut("agent-0", page_records=7)
    lost = next(i for i, (kind, m, _, _) in enumerate(messages)
                if kind == "page" and m == "agent-1")
    assembler = assemble(messages[:lost] + messages[lost + 1:], "agent-1")
    assert not assembler.complete()
    assert assembler.take(CONTEXT) is None


def test_a_slice_without_its_end_is_never_used():
    messages = [m for m in cut("agent-0") if m[0] == "page"]
    assert assemble(messages, "agent-1").take(CONTEXT) is None


def test_a_slice_is_handed_over_once():
    assembler = assemble(cut("agent-0"), "agent-1")
    assert assembler.take(CONTEXT) is not None
    assert assembler.take(CONTEXT) is None


def test_a_slice_says_how_long_before_it_was_taken_its_records_may_have_been_read():
    """The lister began it at 1000 by its clock and the member takes it at 1010: read
    within 10 s, and within 70 s allowing the two clocks the freshness bound (60 s)."""
    listing = assemble(cut("agent-0"), "agent-1", now=1010.0).take(CONTEXT)
    assert listing.read_within == 10.0 + 60


def test_a_stale_slice_is_refused():
    assembler = assemble(cut("agent-0"), "agent-1", now=1000.0 + 61)
    assert assembler.take(CONTEXT) is None


def test_a_slice_cut_on_another_ring_is_refused():
    """The lister's ring and the member's differ while a membership change spreads: the
    member's nodes may be in another member's slice, so it lists by itself."""
    assembler = assemble(cut("agent-0"), "agent-1")
    other_ring = sl.Context(MEMBERS + ("agent-3",), CONTEXT.scope, CONTEXT.fields)
    assert assembler.take(other_ring) is None


def test_a_slice_of_another_scope_or_lacking_fields_is_refused():
    for wanted in (sl.Context(MEMBERS, (None, "s2"), CONTEXT.fields),
                   sl.Context(MEMBERS, CONTEXT.scope, CONTEXT.fields + ("properties",))):
        assert assemble(cut("agent-0"), "agent-1").take(wanted) is None
    fewer = sl.Context(MEMBERS, CONTEXT.scope, ("uuid",))
    assert assemble(cut("agent-0"), "agent-1").take(fewer) is not None


def test_a_newer_listing_replaces_an_older_one_and_late_pages_of_the_older_are_dropped():
    old, new = (1000.0, "agent-0", 1), (1005.0, "agent-0", 2)
    messages = [m for m in cut("agent-0") if m[1] == "agent-1"]
    assembler = sl.Assembler(max_age=60, clock=lambda: 1010.0)
    for message in messages:  # the new listing, whole
        feed(assembler, new, CONTEXT, message)
    assembler.page(list(old), CONTEXT, 0, [record(NODES[0])])  # late, from the old one
    listing = assembler.take(CONTEXT)
    assert listing is not None
    assert sum(r["uuid"] == NODES[0] for r in listing.records) == (
        RING.owner(NODES[0]) == "agent-1")


def test_a_member_with_no_nodes_still_gets_an_end():
    lonely = rp_ring.Ring(MEMBERS)
    splitter = sl.Splitter(lonely, "agent-0")
    pages, ends = splitter.finish({}, "a gap")
    assert pages == []
    assert ends == {m: {"pages": 0, "listing_gap": "a gap"}
                    for m in ("agent-1", "agent-2")}
    assembler = sl.Assembler(max_age=60, clock=lambda: 1.0)
    assembler.end([1.0, "agent-0", 1], CONTEXT, ends["agent-1"])
    listing = assembler.take(CONTEXT)
    assert (list(listing.records), listing.providers, listing.listing_gap) == ([], {}, "a gap")


def test_freshness_counts_from_the_listings_end_and_the_refusal_says_why():
    """A listing that took long on a busy Ironic is as recent as the lister's own pass;
    refusing it made every member list by itself, slowing the next listing further."""
    messages = [(kind, m, seq, {**body, "seconds": 50.0} if kind == "end" else body)
                for kind, m, seq, body in cut("agent-0")]
    assert assemble(messages, "agent-1", now=1000.0 + 70).take(CONTEXT) is not None
    late = assemble(messages, "agent-1", now=1000.0 + 50 + 61)
    assert late.take(CONTEXT) is None
    assert late.refused == "finished 61 s ago, over 60 s"
    other = assemble(messages, "agent-1", now=1000.0 + 60)
    assert other.take(sl.Context(("agent-9",), CONTEXT.scope, CONTEXT.fields)) is None
    assert other.refused == "another ring"
    partial = assemble([m for m in messages if m[0] == "page"], "agent-1")
    assert partial.take(CONTEXT) is None and partial.refused.endswith("no end arrived")


def test_a_listing_still_arriving_is_waited_for_until_its_pages_stop_coming():
    """A member gives up on the lister only when its pages stop coming: one fixed wait
    was outlasted by the lister's listing when agents started together."""
    now = [1000.0]
    assembler = sl.Assembler(max_age=60, clock=lambda: now[0])
    pages = [m for m in cut("agent-0") if m[1] == "agent-1"]
    assert not assembler.arriving(CONTEXT, quiet=30)  # nothing yet: the fixed wait decides
    feed(assembler, (1000.0, "agent-0", 1), CONTEXT, pages[0])
    now[0] += 29
    assert assembler.arriving(CONTEXT, quiet=30)
    now[0] += 2
    assert not assembler.arriving(CONTEXT, quiet=30)  # no page for 31 s: the lister is stuck
    for message in pages[1:]:
        feed(assembler, (1000.0, "agent-0", 1), CONTEXT, message)
    assert assembler.complete() and not assembler.arriving(CONTEXT, quiet=30)  # whole: take it
    assert assembler.take(CONTEXT) is not None
    assert not assembler.arriving(CONTEXT, quiet=30)  # taken: nothing is arriving


def test_a_listing_is_waited_for_however_long_it_takes_if_begun_within_the_bound():
    """A member waits on for a listing that outlasts its interval while pages keep coming
    (at 10^5 nodes the lister's first listing took longer than interval plus wait, and
    the members that stopped waiting each listed by themselves beside it), but not for
    a listing begun after ``begun_by``: one whose slices never end cannot hold it forever."""
    now = [1000.0]
    assembler = sl.Assembler(max_age=60, clock=lambda: now[0])
    pages = [m for m in cut("agent-0") if m[0] == "page" and m[1] == "agent-1"]
    assert len(pages) >= 3
    for message in pages:
        feed(assembler, (1000.0, "agent-0", 1), CONTEXT, message)
        now[0] += 25  # each page within the quiet time, the listing long past 60 s
        assert assembler.arriving(CONTEXT, quiet=30, begun_by=1010.0)
    assert now[0] - 1000.0 > 60
    later = sl.Assembler(max_age=60, clock=lambda: now[0])
    feed(later, (1020.0, "agent-0", 2), CONTEXT, pages[0])
    assert not later.arriving(CONTEXT, quiet=30, begun_by=1010.0)
    assert later.arriving(CONTEXT, quiet=30, begun_by=1020.0)


def test_a_listing_cut_on_a_passing_ring_does_not_push_out_the_one_on_the_members_ring():
    """Agents started together each list at first on the ring they saw then; a later
    listing on such a passing ring left the member with no slice of the ring it ended
    up with, and every member listed by itself (fleet bench, 8 agents started at once)."""
    assembler = sl.Assembler(max_age=60, clock=lambda: 1010.0)
    for message in (m for m in cut("agent-0") if m[1] == "agent-1"):
        feed(assembler, (1000.0, "agent-0", 1), CONTEXT, message)
    passing = sl.Context(("agent-1", "agent-2"), CONTEXT.scope, CONTEXT.fields)
    assembler.page([1003.0, "agent-2", 1], passing, 0, [record(NODES[0])])
    listing = assembler.take(CONTEXT)
    assert listing is not None and len(list(listing.records)) > 0
    assert assembler.take(passing) is None  # older than the slice taken: dropped with it
