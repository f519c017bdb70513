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

"""One bulk observation per interval for the whole ring, not one per agent.  Pure.

Every agent's pass starts with the same two listings, Ironic's nodes and
Placement's managed providers, whatever share of the fleet it owns, so without
sharing the fleet's cost to Ironic and Placement grows with the number of
agents (doc/source/contributor/performance.md, "Cost per interval as agents are
added").  With
sharing, one member, the *lister* (the ring's owner of a fixed key, so every
member agrees on it without asking anyone), lists both for everyone, and hands
each other member its *slice*: the Ironic records and the providers the ring
gives that member.  The member runs its usual pass on the slice: the same
desired state, drift and absence rules as on a listing of its own.

A slice is used only when it is whole (every page arrived), fresh (finished
within one interval), and made on the ring the member sees now, with the member's own
ring options, deployment, scope and fields; otherwise the member lists by itself,
which is what every member did before, so the worst case is the old cost, never a
missed pass.

This module is the pure part: who lists, how a listing is cut into slices and
pages, and how a member puts a slice together again.  What a message must be to be
kept is ``listing_messages``'; carrying them is the agent's
(``rp_reporter.agent.listing_bus``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import time

from rp_reporter.sync import listing_messages

# The ring's owner of this key lists for every member.
LISTER_KEY = "rp_reporter:lister"
# Ironic records per page sent to a member (a page is one message on the bus); a page
# closes sooner once its records hold listing_messages.PAGE_BYTES.
PAGE_RECORDS = 500
# Providers per page of the slice's providers (about 80 bytes each).
PAGE_PROVIDERS = 5000
# Listings of this many contexts at most are kept while they arrive (agents started
# together list on a few passing rings; more is noise, or someone's flood).
MAX_CONTEXTS = 4


def lister(ring):
    """The member that lists for the ring."""
    return ring.owner(LISTER_KEY)


@dataclasses.dataclass(frozen=True)
class Listing:
    """What a reconcile pass reads: Ironic's records (in scope, with ``fields``; an
    iterable read once) and Placement's managed providers ({uuid: (name, generation)}),
    and why the Ironic listing may lack nodes that exist (None: it is complete)."""
    records: collections.abc.Iterable
    providers: dict
    listing_gap: str | None
    # Every record was read within this many seconds before the slice was taken (the
    # lister's clock against the member's, with one freshness bound more for the two
    # clocks to disagree by); None: not known.
    read_within: float | None = None


@dataclasses.dataclass(frozen=True)
class Context:
    """What makes a listing usable by a member: the same deployment, ring (members and
    options), scope and fields."""
    members: tuple      # the ring's members, sorted
    scope: tuple        # (conductor_group, shard)
    fields: tuple       # the node fields listed, sorted
    ring: tuple = ()    # (partitions, hash_algorithm): [ring] options cut the slices
    deployment: str = ""  # the state file's identity hash: same services, users, scope

    def as_dict(self):
        partitions, hash_algorithm = self.ring or (None, None)
        return {"members": list(self.members), "scope": list(self.scope),
                "fields": list(self.fields), "deployment": self.deployment,
                "ring": {"partitions": partitions, "hash_algorithm": hash_algorithm}}

    @classmethod
    def from_dict(cls, data):
        ring = data["ring"]
        return cls(tuple(data["members"]), tuple(data["scope"]), tuple(data["fields"]),
                   (ring["partitions"], ring["hash_algorithm"]), data["deployment"])

    def difference(self, wanted):
        """Why a listing made in this context cannot serve the ``wanted`` one (naming
        what differs), or None when it can."""
        if self.deployment != wanted.deployment:
            return "another deployment (services, users or scope differ)"
        if self.ring != wanted.ring:
            return (f"other [ring] options (partitions, hash_algorithm): {list(self.ring)}, "
                    f"here {list(wanted.ring)}")
        if self.members != wanted.members:
            return "another ring"
        if self.scope != wanted.scope:
            return "another scope"
        if not set(wanted.fields) <= set(self.fields):
            return "fields missing: " + ", ".join(sorted(set(wanted.fields) - set(self.fields)))
        return None

    def serves(self, wanted):
        """A listing made in this context is one the ``wanted`` context may use."""
        return self.difference(wanted) is None


class Splitter:
    """Cuts the lister's listing into the other members' slices as it streams.

    ``add(record)`` takes each Ironic record (every node in scope, owned or not)
    and returns the pages now full, ``[(member, seq, records, providers)]``;
    ``finish(providers, listing_gap)`` returns the last pages (the member's
    providers among them, paged too) and, for each member, the end of its slice:
    how many pages it has and the listing gap.  Pages go out while the listing
    streams, so the lister never holds the fleet's records, and no page outgrows
    ``page_bytes`` whatever the fleet's size.
    """

    def __init__(self, ring, me, page_records=PAGE_RECORDS,
                 page_bytes=listing_messages.PAGE_BYTES, page_providers=PAGE_PROVIDERS):
        self.ring = ring
        self.others = sorted(m for m in ring.members if m != me)
        self.page_records = page_records
        self.page_bytes = page_bytes
        self.page_providers = page_providers
        self._open = {m: [] for m in self.others}
        self._bytes = dict.fromkeys(self.others, 0)
        self._sent = dict.fromkeys(self.others, 0)

    def add(self, record):
        owner = self.ring.owner(str(record.get("uuid")))
        page = self._open.get(owner)
        if page is None:  # this member's own node (or an unreadable record)
            return []
        page.append(record)
        self._bytes[owner] += len(json.dumps(record, separators=(",", ":"), default=str))
        if len(page) < self.page_records and self._bytes[owner] < self.page_bytes:
            return []
        return [self._close(owner)]

    def _close(self, member, providers=None):
        records, self._open[member], self._bytes[member] = self._open[member], [], 0
        seq = self._sent[member]
        self._sent[member] += 1
        return member, seq, records, providers or {}

    def finish(self, providers, listing_gap):
        """([(member, seq, records, providers)], {member: end}) once the listing is
        complete."""
        pages = [self._close(m) for m in self.others if self._open[m]]
        theirs = {m: [] for m in self.others}
        for uuid, (name, generation) in providers.items():
            owner = self.ring.owner(uuid)
            if owner in theirs:
                theirs[owner].append((uuid, (name, generation)))
        for member, owned in theirs.items():
            for first in range(0, len(owned), self.page_providers):
                pages.append(self._close(member, dict(owned[first:first + self.page_providers])))
        ends = {m: {"pages": self._sent[m], "listing_gap": listing_gap} for m in self.others}
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

    def slice(self):
        """The Listing its pages make (once complete).  Its records are streamed: each
        page is let go as the pass reads past it, so a member never holds its slice's
        records and what the pass builds from them whole at once."""
        pages, self.pages = self.pages, {}
        providers = {}
        for seq in sorted(pages):
            providers.update(pages[seq][1])
            pages[seq] = pages[seq][0]

        def records():
            for seq in sorted(pages):
                yield from pages.pop(seq)
        return Listing(records(), providers, self.end["listing_gap"])


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
            kept = self._listings[context] = _Partial(listing_id, last=now)
            while len(self._listings) > MAX_CONTEXTS:  # the least recently heard of goes
                del self._listings[min((c for c in self._listings if c != context),
                                       key=lambda c: self._listings[c].last)]
        if listing_id != kept.listing_id:
            return None
        kept.last = now
        return kept

    def page(self, listing_id, context, seq, records, providers=None):
        kept = self._current(tuple(listing_id), context)
        if kept is not None:
            kept.pages[seq] = (records, providers or {})

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
            self.refused = ("; ".join(sorted({c.difference(wanted) for c in self._listings}))
                            if self._listings else "none arrived")
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
        began_ago = age + float(kept.end.get("seconds") or 0.0)
        return dataclasses.replace(kept.slice(), read_within=max(began_ago, 0.0) + self.max_age)
