"""The lister's slices carried to the other members, and the agent's part in sharing.

The slices travel as oslo.messaging RPC casts on the transport the agents already
use for Ironic's notifications (``[notifications] transport_url``): each agent
serves topic ``rp_reporter_listing.<group>`` as server ``<host>``, and the lister
casts each member's pages to that member alone.  A cast needs no answer, and a
page that never arrives leaves that member's slice incomplete: it then lists by
itself, as without sharing.  What is cut and checked is ``sync/shared_listing.py``'s.
"""

import importlib
import itertools
import logging
import threading
import time

import oslo_messaging

from rp_reporter.outage import Outage
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import shared_listing

LOG = logging.getLogger("rp_reporter.agent")
TOPIC = "rp_reporter_listing"
EXCHANGE = "rp_reporter"
VERSION = "1.0"
NAMESPACE = "rp_reporter.listing"


class _Endpoint:
    target = oslo_messaging.Target(namespace=NAMESPACE, version=VERSION)

    def __init__(self, sharing):
        self._sharing = sharing

    def listing_page(self, ctxt, listing_id, context, seq, records):
        self._sharing.received_page(listing_id, context, seq, records)

    def listing_end(self, ctxt, listing_id, context, end):
        self._sharing.received_end(listing_id, context, end)


# oslo.messaging 18's RPC client and server read these groups from the transport's
# configuration, but the library registers them on its global one only: on the agent's
# own ConfigOpts every cast failed ("no such option oslo_messaging_tracing").
GLOBAL_ONLY_GROUPS = {"oslo_messaging_metrics": "oslo_messaging._metrics.client",
                      "oslo_messaging_tracing": "oslo_messaging._tracing.client"}


def _register_global_only_opts(conf):
    for group, module in GLOBAL_ONLY_GROUPS.items():
        try:
            opts = getattr(importlib.import_module(module), group)
        except (ImportError, AttributeError):  # a release without it reads no such group
            continue
        conf.register_opts(opts, group=group)


class RpcBus:
    """Casts to one member, and serves this one: oslo.messaging RPC."""

    def __init__(self, conf):
        _register_global_only_opts(conf)
        self._transport = oslo_messaging.get_rpc_transport(
            conf, url=conf.notifications.transport_url)
        self._topic = f"{TOPIC}.{conf.coordination.group}"
        self._host = conf.host
        self._client = oslo_messaging.get_rpc_client(
            self._transport, oslo_messaging.Target(topic=self._topic, exchange=EXCHANGE,
                                                   namespace=NAMESPACE, version=VERSION))
        self._server = None

    def serve(self, endpoint):
        target = oslo_messaging.Target(topic=self._topic, server=self._host, exchange=EXCHANGE)
        self._server = oslo_messaging.get_rpc_server(self._transport, target, [endpoint],
                                                     executor="threading")
        self._server.start()

    def cast(self, member, method, **kwargs):
        self._client.prepare(server=member).cast({}, method, **kwargs)

    def stop(self):
        """Stop receiving (returns once the server's poll has; ``wait`` then lets what
        was received finish)."""
        if self._server is not None:
            self._server.stop()

    def wait(self):
        if self._server is not None:
            self._server.wait()


class Sharing:
    """This agent's side of the shared listing: as the lister, it casts every other
    member its slice while its own pass lists; as a member, it puts its slice
    together and hands it to its next pass.

    ``arrived`` is called when a whole slice is here (the agent wakes its loop).
    """

    def __init__(self, conf, ownership, extra_fields, bus=None, arrived=lambda: None):
        self.conf = conf
        self.ownership = ownership
        self._extra_fields = extra_fields  # () -> the node fields the pass lists beyond the model's
        self._bus = bus or RpcBus(conf)
        self._arrived = arrived
        self._assembler = shared_listing.Assembler(max_age=conf.reconcile.interval)
        self._lock = threading.Lock()
        self._pass_ids = itertools.count(1)
        self.listing_seconds = 0.0  # how long the lister's last listing took, as it said
        self.casts = Outage("the shared listing's casts")

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
                                      tuple(sorted(fields)))

    def lists(self):
        """This agent lists for the ring (it is the lister, or alone)."""
        return shared_listing.lister(self.ownership.ring) == self.conf.host

    def wait(self):
        """How long past its own interval a member waits for the lister's slice: the
        option, or twice the lister's last listing, whichever is longer."""
        return max(self.conf.reconcile.shared_listing_wait, 2 * self.listing_seconds)

    # -- member -----------------------------------------------------------------
    def received_page(self, listing_id, context, seq, records):
        self._received(self._assembler.page, listing_id, context, seq, records)

    def received_end(self, listing_id, context, end):
        self.listing_seconds = float(end.get("seconds") or 0.0)
        self._received(self._assembler.end, listing_id, context, end)

    def _received(self, put, listing_id, context, *message):
        """One message into the assembler; the agent woken once the slice is whole."""
        with self._lock:
            put(listing_id, shared_listing.Context.from_dict(context), *message)
            complete = self._assembler.complete()
        if complete:
            self._arrived()

    def take(self):
        """The slice for this pass (whole, fresh, on this ring), once; else None."""
        with self._lock:
            return self._assembler.take(self.context(self.ownership.ring))

    def arriving(self, begun_by):
        """The lister is still sending a slice (a page came within the wait) of a listing
        it began by ``begun_by`` (wall clock)."""
        wanted = self.context(self.ownership.ring)
        with self._lock:
            return self._assembler.arriving(wanted, self.wait(), begun_by)

    @property
    def refused(self):
        """Why the last take() gave no slice."""
        return self._assembler.refused

    # -- lister -----------------------------------------------------------------
    def tee(self):
        """A Tee for this pass's listing, or None when this agent does not list for
        others (it is not the lister, or it is alone)."""
        ring = self.ownership.ring
        if len(ring.members) < 2 or not self.lists():
            return None
        listing_id = [time.time(), self.conf.host, next(self._pass_ids)]
        return Tee(self, ring, listing_id, self.context(ring).as_dict())

    def cast(self, member, method, **kwargs):
        try:
            self._bus.cast(member, method, **kwargs)
        except Exception as e:  # noqa: BLE001 - the member lists by itself instead
            self.casts.failed(e)
            return False
        self.casts.ok()
        return True


class Tee:
    """Sees every record of the lister's listing; sends each other member its pages as
    they fill, and the end of its slice once the listing is complete."""

    def __init__(self, sharing, ring, listing_id, context):
        self._sharing = sharing
        self._splitter = shared_listing.Splitter(ring, sharing.conf.host)
        self._listing_id = listing_id
        self._context = context
        self._started = time.monotonic()
        self._failed = set()  # members a cast failed for: no end, so they list themselves

    def _send_pages(self, pages):
        for member, seq, page in pages:
            if member in self._failed:
                continue
            if not self._sharing.cast(member, "listing_page", listing_id=self._listing_id,
                                      context=self._context, seq=seq, records=page):
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
                sent += self._sharing.cast(member, "listing_end", listing_id=self._listing_id,
                                           context=self._context,
                                           end={**end, "seconds": seconds})
        LOG.debug("shared listing sent to %d of %d members", sent, len(ends))
        return sent
