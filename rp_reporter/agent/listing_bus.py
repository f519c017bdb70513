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

"""The lister's slices carried to the other members, and the agent's part in sharing.

The slices travel as oslo.messaging RPC casts on the transport the agents already
use for Ironic's notifications (``conf.bus_url``): each agent
serves topic ``rp_reporter_listing.<group>`` as server ``<host>``, and the lister
casts each member's pages to that member alone.  A cast needs no answer, and a
page that never arrives leaves that member's slice incomplete: it then lists by
itself, as without sharing.  What is cut and checked is ``sync/shared_listing.py``'s.

Anyone who can publish on the vhost can cast to these topics, so what arrives is
kept only when ``listing_messages.parse`` accepts it (bounded, signed with one of
``[reconcile] shared_listing_keys``) and it comes from the lister of the ring it
names; anything else is dropped, counted and logged once per sender and kind.
The lister's casts leave from a thread of their own through a bounded queue, each
tried once: a broker that is down or blocked costs the members their slices (they
list by themselves), never the lister's pass.
"""

import collections
import functools
import itertools
import logging
import queue
import threading
import time

import oslo_messaging

from rp_reporter import ring as rp_ring
from rp_reporter.agent import rpc_bus
from rp_reporter.outage import Outage
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import listing_messages
from rp_reporter.sync import shared_listing

LOG = logging.getLogger("rp_reporter.agent")
# Casts waiting for the sender thread; past this the pass drops the rest of its slices.
SEND_QUEUE = 64
# The listings whose failed members the sender remembers (older ones are over).
REMEMBERED_LISTINGS = 4
KINDS = {"page": listing_messages.Page, "end": listing_messages.End}


class _Endpoint:
    """Takes any arguments: a cast with missing or odd ones is the receiver's to drop,
    not a TypeError in oslo.messaging's dispatcher."""
    target = oslo_messaging.Target(namespace=rpc_bus.NAMESPACE, version=rpc_bus.VERSION)

    def __init__(self, sharing):
        self._sharing = sharing

    def listing_page(self, ctxt, **kwargs):
        self._sharing.received("page", kwargs.get("message"))

    def listing_end(self, ctxt, **kwargs):
        self._sharing.received("end", kwargs.get("message"))


@functools.lru_cache(maxsize=8)
def _lister_of(members, ring_options):
    """The lister of the ring a listing names, cut with the options it names (a slice
    of other options is refused later, saying so)."""
    partitions, hash_algorithm = ring_options
    return shared_listing.lister(rp_ring.Ring(members, partitions=partitions,
                                              hash_function=hash_algorithm))


class Sender:
    """The lister's casts, one at a time from a thread of their own, each tried once.

    ``offer`` never blocks the pass: with SEND_QUEUE casts already waiting it refuses,
    and that member gets no more of this listing (it lists by itself).  A member a
    cast failed for gets no more of the listing either: without its end it lists by
    itself."""

    def __init__(self, bus, casts, on_failure=lambda: None):
        self._bus = bus
        self._casts = casts  # Outage: failed casts reach /healthz
        self._on_failure = on_failure  # and the metric
        self._queue = queue.Queue(SEND_QUEUE)
        self._lock = threading.Lock()
        self._failed = collections.OrderedDict()  # listing id -> members failed for it
        self.failures = 0
        threading.Thread(target=self._run, name="listing-sender", daemon=True).start()

    def _failed_for(self, listing_id):
        with self._lock:
            if listing_id not in self._failed:
                self._failed[listing_id] = set()
                while len(self._failed) > REMEMBERED_LISTINGS:
                    self._failed.popitem(last=False)
            return self._failed[listing_id]

    def offer(self, listing_id, member, method, message):
        if member in self._failed_for(listing_id):
            return False
        try:
            self._queue.put_nowait((listing_id, member, method, message))
        except queue.Full:
            self._fail(listing_id, member, "the send queue is full (the broker is slow)")
            return False
        return True

    def _fail(self, listing_id, member, why):
        failed = self._failed_for(listing_id)
        if member not in failed:
            failed.add(member)
            self.failures += 1
            self._on_failure()
            self._casts.failed(why)

    def _run(self):
        while True:
            listing_id, member, method, message = self._queue.get()
            if member in self._failed_for(listing_id):
                continue
            try:
                self._bus.cast(member, method, message=message)
            except Exception as e:  # noqa: BLE001 - that member lists by itself instead
                self._fail(listing_id, member, f"{type(e).__name__}: {e}")
                continue
            self._casts.ok()


class Sharing:
    """This agent's side of the shared listing: as the lister, it casts every other
    member its slice while its own pass lists; as a member, it puts its slice
    together and hands it to its next pass.

    ``arrived`` is called when a whole slice is here (the agent wakes its loop);
    ``dropped(kind, reason)`` when a message is not kept and ``cast_failed()`` when a
    cast of this lister's fails (the agent counts both).
    """

    def __init__(self, conf, ownership, extra_fields, bus=None, arrived=lambda: None,
                 dropped=lambda kind, reason: None, cast_failed=lambda: None, deployment=""):
        self.conf = conf
        self.ownership = ownership
        self._extra_fields = extra_fields  # () -> the node fields the pass lists beyond the model's
        self._keys = list(conf.reconcile.shared_listing_keys)
        self._bus = bus or rpc_bus.RpcBus(conf)
        self._arrived = arrived
        self._dropped = dropped
        self._deployment = deployment  # the state file's identity hash
        self._assembler = shared_listing.Assembler(max_age=conf.reconcile.interval)
        self._lock = threading.Lock()
        self._pass_ids = itertools.count(1)
        self._logged = collections.OrderedDict()  # (sender, kind) already logged as dropped
        self.listing_seconds = 0.0  # how long the lister's last listing took, as it said
        self.casts = Outage("the shared listing's casts")
        self.sender = Sender(self._bus, self.casts, cast_failed)

    def start(self):
        self._bus.serve(_Endpoint(self))
        return self

    def stop(self):
        """Stop receiving slices (``stopped`` then lets what was received finish)."""
        self._bus.stop()

    def stopped(self):
        self._bus.wait()

    def context(self, ring):
        fields = ironic_sync.NODE_FIELDS + tuple(self._extra_fields())
        return shared_listing.Context(tuple(sorted(ring.members)),
                                      (self.conf.ironic.conductor_group, self.conf.ironic.shard),
                                      tuple(sorted(fields)),
                                      (self.conf.ring.partitions, self.conf.ring.hash_algorithm),
                                      self._deployment)

    def is_lister(self):
        """This agent lists for the ring (it is the lister, or alone)."""
        return shared_listing.lister(self.ownership.ring) == self.conf.host

    def wait_seconds(self):
        """How long past its own interval a member waits for the lister's slice: the
        option, or twice the lister's last listing, whichever is longer, and never
        longer than ``[reconcile] shared_listing_wait_max``."""
        return min(max(self.conf.reconcile.shared_listing_wait, 2 * self.listing_seconds),
                   self.wait_max_seconds())

    def wait_max_seconds(self):
        bound = self.conf.reconcile.shared_listing_wait_max
        return self.conf.reconcile.interval if bound is None else bound

    # -- member -----------------------------------------------------------------
    def received(self, kind, message):
        """One message off the bus: kept if it is whole, signed and the ring's lister's;
        else dropped.  Never raises (it runs in oslo.messaging's dispatcher)."""
        try:
            parsed = listing_messages.parse(message, self._keys)
            if not isinstance(parsed, KINDS[kind]):
                raise listing_messages.Invalid("sent as the other kind")
            context = shared_listing.Context.from_dict(parsed.context)
            sender = parsed.listing_id[1]
            if _lister_of(context.members, context.ring) != sender:
                raise listing_messages.Invalid(f"{sender!r} is not the lister of its ring")
            with self._lock:
                if isinstance(parsed, listing_messages.Page):
                    self._assembler.page(parsed.listing_id, context, parsed.seq,
                                         parsed.records, parsed.providers)
                else:
                    self.listing_seconds = parsed.seconds
                    self._assembler.end(parsed.listing_id, context,
                                        {"pages": parsed.pages, "seconds": parsed.seconds,
                                         "listing_gap": parsed.listing_gap})
                complete = self._assembler.complete()
        except listing_messages.Invalid as e:
            self._drop(kind, message, str(e))
            return
        except Exception as e:  # noqa: BLE001 - a bug here must not reach the dispatcher
            LOG.exception("shared listing: a %s message could not be taken", kind)
            self._drop(kind, message, f"{type(e).__name__}: {e}")
            return
        if complete:
            self._arrived()

    def _drop(self, kind, message, reason):
        """Count it; log it once per (claimed) sender and kind."""
        self._dropped(kind, reason)
        claimed = message.get("listing_id") if isinstance(message, dict) else None
        sender = str(claimed[1])[:64] if isinstance(claimed, list) and len(claimed) == 3 \
            else "unknown"
        key = (sender, kind)
        if key in self._logged:
            return
        self._logged[key] = True
        while len(self._logged) > 1024:  # a flood of invented senders holds no memory
            self._logged.popitem(last=False)
        LOG.warning("shared listing: a %s message (sender %s) dropped: %s; further ones "
                    "from it are counted, not logged", kind, sender, reason)

    def take(self):
        """The slice for this pass (whole, fresh, on this ring), once; else None."""
        with self._lock:
            return self._assembler.take(self.context(self.ownership.ring))

    def arriving(self, begun_by):
        """The lister is still sending a slice (a page came within the wait) of a listing
        it began by ``begun_by`` (wall clock)."""
        wanted = self.context(self.ownership.ring)
        with self._lock:
            return self._assembler.arriving(wanted, self.wait_seconds(), begun_by)

    @property
    def refused(self):
        """Why the last take() gave no slice."""
        return self._assembler.refused

    def slice(self, expected, stopping, resync_now):
        """The slice for this member's pass, or None when it lists by itself: the one
        place that decides.

        The lister (or an agent alone) always lists.  A member takes the slice that woke
        it; after a start or a ring change (``expected``: the lister then lists at once)
        it waits for one up to ``wait_seconds()``, and waits on while the lister's pages
        of a listing begun within one interval keep coming: its own listing of the same
        Ironic would take as long and slow the lister's (seen at 10^5 nodes, agents
        started together: two members listing beside the lister made three listings).
        Never past ``wait_max_seconds()``, and not at all once ``stopping`` is set;
        ``resync_now`` is the agent's event, set by an arriving slice."""
        if self.is_lister():
            return None
        started, waiting_since = time.monotonic(), time.time()  # the lister's ids: wall clock
        deadline = started + (self.wait_seconds() if expected else 0)
        bound = started + self.wait_max_seconds()
        heartbeat = self.conf.coordination.heartbeat
        while True:
            listing = self.take()
            now = time.monotonic()
            if (listing is not None or stopping.is_set() or now >= bound
                    or (now >= deadline and not self.arriving(
                        begun_by=waiting_since + self.conf.reconcile.interval))):
                break
            resync_now.clear()
            resync_now.wait(min((deadline if now < deadline else bound) - now, heartbeat))
        if listing is None and not stopping.is_set():
            LOG.info("no whole shared listing from the lister on this ring (%s%s): listing "
                     "by myself", self.refused,
                     "; waited the longest [reconcile] shared_listing_wait_max allows"
                     if time.monotonic() >= bound else "")
        return listing

    # -- lister -----------------------------------------------------------------
    def tee(self):
        """A Tee for this pass's listing, or None when this agent does not list for
        others (it is not the lister, or it is alone)."""
        ring = self.ownership.ring
        if len(ring.members) < 2 or not self.is_lister():
            return None
        listing_id = (time.time(), self.conf.host, next(self._pass_ids))
        return Tee(self, ring, listing_id, self.context(ring).as_dict())

    def send(self, listing_id, member, method, message):
        """Hand one signed message to the sender; False if that member gets no more."""
        return self.sender.offer(listing_id, member, method,
                                 listing_messages.sign(message, self._keys))


class Tee:
    """Sees every record of the lister's listing; sends each other member its pages as
    they fill, and the end of its slice once the listing is complete."""

    def __init__(self, sharing, ring, listing_id, context):
        self._sharing = sharing
        self._splitter = shared_listing.Splitter(ring, sharing.conf.host)
        self._listing_id = listing_id
        self._context = context
        self._started = time.monotonic()
        self._failed = set()  # members that get no more of this listing

    def _send_pages(self, pages):
        for member, seq, records, providers in pages:
            if member in self._failed:
                continue
            message = listing_messages.page_message(self._listing_id, self._context, seq,
                                                    records, providers)
            if not self._sharing.send(self._listing_id, member, "listing_page", message):
                self._failed.add(member)

    def add(self, record):
        self._send_pages(self._splitter.add(record))

    def finish(self, providers, listing_gap):
        pages, ends = self._splitter.finish(providers, listing_gap)
        self._send_pages(pages)
        seconds = round(time.monotonic() - self._started, 3)
        sent = 0
        for member, end in ends.items():
            if member not in self._failed:
                message = listing_messages.end_message(self._listing_id, self._context,
                                                       end["pages"], listing_gap, seconds)
                sent += self._sharing.send(self._listing_id, member, "listing_end", message)
        LOG.debug("shared listing handed to the sender for %d of %d members", sent, len(ends))
        return sent
