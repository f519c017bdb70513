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


@dataclasses.dataclass
class _Partial:
    """One listing's messages to this member so far."""
    listing_id: tuple
    pages: dict = dataclasses.field(default_factory=dict)
    end: dict | None = None
    last: float = 0.0    # when its last message arrived

    def complete(self):
        return self.end is not None and len(self.pages) == self.end["pages"]


class Assembler:
    """Puts a member's slice together from its pages, whatever their order.

    The newest listing of each context (ring, scope, fields) is kept: a page or end of
    an older one is dropped.  Per context, because agents started together each list
    at first on the ring they saw then: a listing cut on a passing ring must not push
    out the one cut on the ring the member ends up with.  ``take(wanted)`` hands the
    newest whole, fresh slice made in a context that serves ``wanted`` over once, else
    None, and ``refused`` then says why.

    Fresh is counted from the listing's end, not its start: a listing that took long
    on a busy Ironic is as recent as the lister's own pass on it, and refusing it made
    every member list by itself, which made the next listing slower still.  What the
    age guards against is a slice that waited in a queue (a member started again).
    """

    def __init__(self, max_age, clock=time.time):
        self.max_age = max_age
        self.clock = clock
        self._listings = {}  # context -> _Partial of its newest listing
        self.refused = None

    def _current(self, listing_id, context):
        """The listing a message of ``listing_id`` belongs to, or None when a newer one
        of its context replaced it.  Listings that stopped arriving longer than they
        could stay fresh are dropped (their pages are memory only)."""
        now = self.clock()
        for old in [c for c, kept in self._listings.items() if now - kept.last > self.max_age]:
            del self._listings[old]
        kept = self._listings.get(context)
        if kept is None or listing_id > kept.listing_id:
            kept = self._listings[context] = _Partial(listing_id)
        if listing_id != kept.listing_id:
            return None
        kept.last = now
        return kept

    def page(self, listing_id, context, seq, records):
        kept = self._current(tuple(listing_id), context)
        if kept is not None:
            kept.pages[seq] = records

    def end(self, listing_id, context, end):
        kept = self._current(tuple(listing_id), context)
        if kept is not None:
            kept.end = end

    def complete(self):
        """A whole listing is here (whether it serves the member, take() says)."""
        return any(kept.complete() for kept in self._listings.values())

    def _serving(self, wanted):
        """The newest listing made in a context serving ``wanted``, or None."""
        found = [(kept.listing_id, context) for context, kept in self._listings.items()
                 if context.serves(wanted)]
        return self._listings[max(found)[1]] if found else None

    def arriving(self, wanted, quiet, begun_by=float("inf")):
        """A listing serving ``wanted`` is partly here, its last message came within
        ``quiet`` seconds, and the lister began it by ``begun_by`` (its wall clock).

        The lister is still sending it, so a member waits for the rest instead of
        listing by itself beside it: a listing slowed by agents starting together
        outlasted a fixed wait, and each member's own listing slowed it further.
        ``begun_by`` bounds the wait when the lister's listings never end for this
        member (an end cast lost each time): a later listing is not waited for."""
        kept = self._serving(wanted)
        return (kept is not None and not kept.complete()
                and self.clock() - kept.last <= quiet and kept.listing_id[0] <= begun_by)

    def take(self, wanted):
        """The slice, once, if whole, fresh and made in a context serving ``wanted``."""
        kept = self._serving(wanted)
        if kept is None:
            self.refused = ("cut on another ring, scope or fields" if self._listings else
                            "none arrived")
            return None
        if not kept.complete():
            self.refused = (f"{len(kept.pages)} of its pages and "
                            f"{'an' if kept.end else 'no'} end arrived")
            return None
        # Used (or refused) once, with every listing older than it.
        self._listings = {c: k for c, k in self._listings.items()
                          if k.listing_id > kept.listing_id}
        age = self.clock() - (kept.listing_id[0] + float(kept.end.get("seconds") or 0.0))
        if not -self.max_age <= age <= self.max_age:
            self.refused = f"finished {age:.0f} s ago, over {self.max_age:.0f} s"
            return None
        self.refused = None
        records = [r for seq in sorted(kept.pages) for r in kept.pages[seq]]
        providers = {u: (name, generation)
                     for u, (name, generation) in kept.end["providers"].items()}
        return Listing(records, providers, kept.end["listing_gap"])
