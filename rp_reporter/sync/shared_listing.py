"""One bulk observation per interval for the whole ring, not one per agent.  Pure.

Every agent's pass starts with the same two listings, Ironic's nodes and
Placement's managed providers, whatever share of the fleet it owns, so without
sharing the fleet's cost to Ironic and Placement grows with the number of
agents (doc/performance.md, "Cost per interval as agents are added").  With
sharing, one member, the *lister* (the ring's owner of a fixed key, so every
member agrees on it without asking anyone), lists both for everyone, and hands
each other member its *slice*: the Ironic records and the providers the ring
gives that member.  The member runs its usual pass on the slice: the same
desired state, drift and absence rules as on a listing of its own.

A slice is used only when it is whole (every page arrived), fresh (finished
within one interval), and made on the ring the member sees now, with the member's own
scope and fields; otherwise the member lists by itself, which is what every
member did before, so the worst case is the old cost, never a missed pass.

This module is the pure part: who lists, how a listing is cut into slices and
pages, and how a member puts a slice together again.  Carrying the pages is the
agent's (``rp_reporter.agent.listing_bus``).
"""

import dataclasses
import time

# The ring's owner of this key lists for every member.
LISTER_KEY = "rp_reporter:lister"
# Ironic records per page sent to a member (a page is one message on the bus).
PAGE_RECORDS = 500


def lister(ring):
    """The member that lists for the ring."""
    return ring.owner(LISTER_KEY)


@dataclasses.dataclass(frozen=True)
class Listing:
    """What a reconcile pass reads: Ironic's records (in scope, with ``fields``) and
    Placement's managed providers ({uuid: (name, generation)}), and why the Ironic
    listing may lack nodes that exist (None: it is complete)."""
    records: list
    providers: dict
    listing_gap: str | None


@dataclasses.dataclass(frozen=True)
class Context:
    """What makes a listing usable by a member: the same ring, scope and fields."""
    members: tuple   # the ring's members, sorted
    scope: tuple     # (conductor_group, shard)
    fields: tuple    # the node fields listed, sorted

    def as_dict(self):
        return {"members": list(self.members), "scope": list(self.scope),
                "fields": list(self.fields)}

    @classmethod
    def from_dict(cls, data):
        return cls(tuple(data["members"]), tuple(data["scope"]), tuple(data["fields"]))

    def serves(self, wanted):
        """A listing made in this context is one the ``wanted`` context may use."""
        return (self.members == wanted.members and self.scope == wanted.scope
                and set(wanted.fields) <= set(self.fields))


class Splitter:
    """Cuts the lister's listing into the other members' slices as it streams.

    ``add(record)`` takes each Ironic record (every node in scope, owned or not)
    and returns the pages now full, ``[(member, seq, page)]``; ``finish(providers,
    listing_gap)`` returns the last pages and, for each member, the end of its
    slice: how many pages it has, its providers, and the listing gap.  Pages go
    out while the listing streams, so the lister never holds the fleet's records.
    """

    def __init__(self, ring, me, page_records=PAGE_RECORDS):
        self.ring = ring
        self.others = sorted(m for m in ring.members if m != me)
        self.page_records = page_records
        self._open = {m: [] for m in self.others}
        self._sent = dict.fromkeys(self.others, 0)

    def add(self, record):
        owner = self.ring.owner(str(record.get("uuid")))
        page = self._open.get(owner)
        if page is None:  # this member's own node (or an unreadable record)
            return []
        page.append(record)
        if len(page) < self.page_records:
            return []
        return [self._close(owner)]

    def _close(self, member):
        page, self._open[member] = self._open[member], []
        seq = self._sent[member]
        self._sent[member] += 1
        return member, seq, page

    def finish(self, providers, listing_gap):
        """([(member, seq, last page)], {member: end}) once the listing is complete."""
        pages = [self._close(m) for m in self.others if self._open[m]]
        theirs = {m: {} for m in self.others}
        for uuid, (name, generation) in providers.items():
            owner = self.ring.owner(uuid)
            if owner in theirs:
                theirs[owner][uuid] = [name, generation]
        ends = {m: {"pages": self._sent[m], "providers": theirs[m], "listing_gap": listing_gap}
                for m in self.others}
        return pages, ends


class Assembler:
    """Puts a member's slice together from its pages, whatever their order.

    Only the newest listing is kept: a page or end of an older one is dropped.
    ``take(wanted)`` hands a whole, fresh slice made in a context that serves
    ``wanted`` over once, else None, and ``refused`` then says why.

    Fresh is counted from the listing's end, not its start: a listing that took long
    on a busy Ironic is as recent as the lister's own pass on it, and refusing it made
    every member list by itself, which made the next listing slower still.  What the
    age guards against is a slice that waited in a queue (a member started again).
    """

    def __init__(self, max_age, clock=time.time):
        self.max_age = max_age
        self.clock = clock
        self._id = None      # (listed_at, lister, pass_id) of the listing being put together
        self._context = None
        self._pages = {}
        self._end = None
        self._last = None    # when the last message of the listing kept arrived
        self.refused = None

    def _current(self, listing_id, context):
        """Whether a message of ``listing_id`` belongs to the listing kept (a newer
        one replaces it)."""
        if self._id is None or listing_id > self._id:
            self._id, self._context, self._pages, self._end = listing_id, context, {}, None
        if listing_id == self._id:
            self._last = self.clock()
            return True
        return False

    def page(self, listing_id, context, seq, records):
        if self._current(tuple(listing_id), context):
            self._pages[seq] = records

    def end(self, listing_id, context, end):
        if self._current(tuple(listing_id), context):
            self._end = end

    def complete(self):
        return self._end is not None and len(self._pages) == self._end["pages"]

    def arriving(self, quiet):
        """A listing is partly here and its last message came within ``quiet`` seconds:
        the lister is still sending it, so a member waits for the rest instead of
        listing by itself beside it (a listing slowed by agents starting together
        outlasted a fixed wait, and each member's own listing slowed it further)."""
        partly = bool(self._pages) or self._end is not None
        return (partly and not self.complete()
                and self.clock() - self._last <= quiet)

    def take(self, wanted):
        """The slice, once, if whole, fresh and made in a context serving ``wanted``."""
        if not self.complete():
            self.refused = ("none arrived" if self._id is None else
                            f"{len(self._pages)} of its pages and {'an' if self._end else 'no'} "
                            f"end arrived")
            return None
        age = self.clock() - (self._id[0] + float(self._end.get("seconds") or 0.0))
        self.refused = ("cut on another ring, scope or fields"
                        if not self._context.serves(wanted) else
                        f"finished {age:.0f} s ago, over {self.max_age:.0f} s"
                        if not -self.max_age <= age <= self.max_age else None)
        records = [r for seq in sorted(self._pages) for r in self._pages[seq]]
        providers = {u: (name, generation)
                     for u, (name, generation) in self._end["providers"].items()}
        listing = Listing(records, providers, self._end["listing_gap"])
        self._pages, self._end = {}, None  # used (or refused) once
        return listing if self.refused is None else None
