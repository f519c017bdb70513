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

"""nova's node refresh listing only what changed (``rp_reporter.fleet_listing``).

The requests are nova's own listing's (its shard and conductor group filters, the
baremetal endpoint nova's configuration names; the whole fleet with the fields nova
reads) with Ironic's sort keys, which openstacksdk's node query does not pass: so they
go through the same proxy as raw GETs, each node built as openstacksdk builds a listed
one.  The listings of what changed ask every field: Ironic's list carries the time
stamps only then (it refuses ``created_at`` and ``updated_at`` in ``fields``).  Every
listing reads on while Ironic's answer has a ``next`` link: Ironic cuts each page to its
``[api] max_limit``, which an operator may set below the page asked, so a short page is
no end.  A failure is nova's: logged, and ``VirtDriverNotReady`` (nova's periodic then
skips its run); a whole listing's made beside nova's periodic is logged, and a refresh
starts another once a backoff has passed (``RETRY_S``, doubled at each failure in a row,
up to a full pass); ``[rp_reporter] listing_failures_alert`` failures in a row set the
driver's ``rp_reporter_whole_listing_failing`` metric.
"""

import datetime
import logging
import math
import threading
import time

from nova import exception
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils
from openstack.baremetal.v1 import node as sdk_node

from rp_reporter import fleet_listing

LOG = logging.getLogger(__name__)
FULL_PAGE = 1000  # Ironic's [api] max_limit by default: larger pages are cut to it
# Most refreshes find a handful of nodes written since: a short first page (every field
# of a node is 2-3 KB, against 0.5 KB for nova's fields), longer ones after it.
CHANGES_PAGES = (10, 50)
RETRY_S = 10.0  # a failed whole listing's first retry; doubled at each failure in a row
WHOLE_AHEAD_MAX = 8  # refreshes listed whole at once after what changed cost more, at most
# nova's names of its filters and Ironic's (openstacksdk's query mapping renames some).
FIELD_NAMES = {"id": "uuid", "instance_id": "instance_uuid", "is_maintenance": "maintenance"}


class OverBudget(Exception):
    """A listing of what changed came to more bytes than the whole fleet's."""


class WholeListing:
    """One listing of the whole fleet: when it started, and its nodes once done."""

    def __init__(self, started):
        self.started = started  # monotonic
        self.clocks = [datetime.datetime.now(datetime.timezone.utc)]  # Ironic's follows
        self.nodes = None  # the listed nodes; None while under way, or if it failed
        self.done = threading.Event()

    def run(self, listing):
        """``listing()``: the nodes (a failure is logged by it, and leaves none)."""
        try:
            self.nodes = listing()
        except Exception as e:  # noqa: BLE001 - off nova's path: the next refresh retries
            LOG.warning("The whole listing of the fleet beside nova's periodic failed (%s): "
                        "a node refresh starts another after a backoff", e.__cause__ or e)
        finally:
            self.done.set()


def in_a_thread(work):
    """Runs ``work`` on a thread of its own (a green one where nova runs on eventlet)."""
    threading.Thread(target=work, name="rp_reporter-whole-listing", daemon=True).start()


class NodeListing:
    """The fleet of nova's node refresh, for the driver's ``_get_node_list``.

    The service's first refresh lists the whole fleet (nova has none yet).  Later, a
    whole listing that is due is made off nova's path (``in_background``): at 10,000
    nodes it takes longer than nova's periodic may, and nova's periodic tasks run one
    after another.  The refresh that finds it done takes its nodes, then lists the
    nodes written since it started."""

    def __init__(self, connection, full_every_s, requests_counter, clock=time.monotonic,
                 in_background=in_a_thread, failing=None, alert_after=3):
        self._connection = connection  # () -> nova's openstacksdk baremetal proxy
        self.view = fleet_listing.FleetView(full_every_s)
        self._requests = requests_counter  # a Prometheus counter, by listing
        self.clock = clock
        self._in_background = in_background  # (work) -> None, work run off nova's path
        self._lock = threading.Lock()  # one listing at a time: the periodic's, a build's
        self._whole = None  # the whole listing under way, or done and not yet taken
        self._filters = {}  # nova's scope (shard, conductor group), as its refresh asks
        self.seen = {}  # uuid: when (this clock) a listing of Ironic last held the node
        self.refreshed_at = None  # when (this clock) the latest refresh started
        self._whole_pages = 1  # requests the latest whole listing took
        self._whole_bytes = math.inf  # what its answers came to
        self._costlier = 0  # refreshes in a row whose changes came to more than the whole
        self._whole_ahead = 0  # refreshes that list the whole fleet at once, before a try
        self.failures = 0  # whole listings failed in a row
        self._retry_at = -math.inf  # no whole listing starts before (after a failure)
        self._failing = failing  # a Prometheus gauge: 1 from alert_after failures in a row
        self._alert_after = alert_after
        # nodes Ironic said it deleted (``deleted``): when (this clock); kept out of the
        # fleet until a whole listing that started after the word
        self._deleted = {}

    def nodes(self, fields, **filters):
        """Every node of the fleet (nova's ``fields`` of each; ``filters``: nova's
        shard and conductor group), as of now."""
        with self._lock:
            now = self.refreshed_at = self.clock()
            self._filters = filters
            if self.view.since is None:  # the service's first: nova has no fleet yet
                return self._whole_now(now, fields, filters)
            self._take_if_done()  # if it failed, the whole listing is still due:
            if self._whole is None and self.view.full_due(now) and now >= self._retry_at:
                whole = self._whole = WholeListing(now)
                self._in_background(
                    lambda: whole.run(lambda: self._list_whole(whole, fields, filters)))
                self._take_if_done()  # (done already where run at once)
            if self._whole_ahead:  # a mass operation under way, as last seen
                self._whole_ahead -= 1
                return self._whole_now(now, fields, filters)
            since = self.view.since
            clocks = [datetime.datetime.now(datetime.timezone.utc)]  # Ironic's follows
            spent = [0, self._whole_bytes]
            try:
                changed = [*self._written_since("updated_at", since, filters, clocks, spent),
                           *self._written_since("created_at", since, filters, clocks, spent)]
            except OverBudget:
                # a mass deploy or cleaning: every lock and heartbeat is a write.  The next
                # refreshes (1, 2, 4 ... in a row) list the whole fleet at once.
                self._costlier += 1
                self._whole_ahead = min(2 ** (self._costlier - 1), WHOLE_AHEAD_MAX)
                LOG.info("nova's node refresh: the nodes written since the last listing "
                         "came to more than the whole fleet's listing (%d bytes, every field "
                         "of each against nova's): the whole fleet listed instead, and at "
                         "the next %d refreshes", self._whole_bytes, self._whole_ahead)
                return self._whole_now(now, fields, filters)
            self._costlier = 0
            self.view.took_changes(changed, clocks[:2])
            self.seen.update((node.id, now) for node in changed)
            LOG.debug("nova's node refresh: %d nodes written in Ironic since %s",
                      len({node.id for node in changed}), since.isoformat())
            return self._fleet()

    def _fleet(self):
        """The fleet as listed, but the nodes Ironic said it deleted since (a listing
        that started before the delete may still have held them)."""
        return [node for uuid, node in self.view.nodes.items() if uuid not in self._deleted]

    def _whole_now(self, now, fields, filters):
        """The whole fleet listed in nova's refresh, and taken."""
        whole = WholeListing(now)
        whole.nodes = self._list_whole(whole, fields, filters)
        self._take(whole)
        return self._fleet()

    def _list_whole(self, whole, fields, filters):
        """The whole fleet, nova's fields of each node (Ironic's clock on ``whole``)."""
        fields = ",".join(FIELD_NAMES.get(f, f) for f in fields)
        spent = [0, math.inf]
        nodes = list(self._pages(dict(filters, fields=fields), FULL_PAGE, "full",
                                 whole.clocks, spent=spent))
        self._whole_pages = max(1, len(whole.clocks) - 1)  # an answer's Date each
        self._whole_bytes = spent[0]
        LOG.info("nova's node refresh: the whole fleet listed, %d nodes in %.1f s (once a "
                 "full pass: the listing that sees nodes deleted or moved out; the others "
                 "list the nodes written since)", len(nodes), self.clock() - whole.started)
        return nodes

    def _take_if_done(self):
        """Takes the whole listing made beside nova's periodic, once it is over; one that
        failed is made again after a backoff."""
        if self._whole is not None and self._whole.done.is_set():
            whole, self._whole = self._whole, None
            if whole.nodes is not None:
                self._take(whole)
                return
            self.failures += 1
            self._retry_at = self.clock() + min(RETRY_S * 2 ** (self.failures - 1),
                                                self.view.full_every_s)
            if self._failing is not None and self.failures >= self._alert_after:
                self._failing.set(1)

    def _take(self, whole):
        self.view.took_full(whole.nodes, whole.started, whole.clocks[:2])
        self.seen = dict.fromkeys(self.view.nodes, whole.started)
        self._deleted = {uuid: at for uuid, at in self._deleted.items() if at >= whole.started}
        self.failures, self._retry_at = 0, -math.inf
        if self._failing is not None:
            self._failing.set(0)

    def reset(self):
        """Forget the fleet: the next listing lists it whole."""
        with self._lock:
            self.view = fleet_listing.FleetView(self.view.full_every_s, self.view.slack_s)
            self._whole = None  # one under way is left to end unread
            self.seen = {}

    def in_scope(self, uuids):
        """Those of ``uuids`` Ironic holds in nova's scope now (its shard and conductor
        group, as its last refresh asked), or None if Ironic fails to answer; the others
        (deleted, or moved to another shard or conductor group) leave the fleet now.
        Ironic's node list has no filter by uuid: as many nodes as a whole listing has
        pages, or fewer, are read one by one, more by one listing of the scope's uuids
        alone (at a tie as many requests either way, the reads far smaller: the node a
        quiet periodic checks, in a scope of one page, is one read of the node, not a
        listing of every uuid of the scope)."""
        with self._lock:
            filters, now = dict(self._filters), self.clock()
            by_listing = len(uuids) > self._whole_pages
        try:
            if by_listing:
                held = set(uuids) & set(self._pages(
                    dict(filters, fields="uuid"), FULL_PAGE, "check", [],
                    build=lambda raw: raw["uuid"]))
            else:
                held = {uuid for uuid in uuids if self._held(uuid, filters)}
        except exception.VirtDriverNotReady:
            return None  # logged; nova's look at the nodes waits for the next periodic
        gone = sorted(set(uuids) - held)
        with self._lock:
            for uuid in gone:
                self.view.nodes.pop(uuid, None)
                self.seen.pop(uuid, None)
            self.seen.update(dict.fromkeys(held, now))
        if gone:
            LOG.info("%d nodes of nova's node cache are no longer in Ironic's listing of this "
                     "service's scope (deleted, or moved to another shard or conductor group): "
                     "out of the cache now, not handed to nova's resource tracker: %s",
                     len(gone), ", ".join(gone))
        return held

    def deleted(self, uuid):
        """Ironic said it deleted node ``uuid`` (its notification): once Ironic holds it
        no more in nova's scope (one read: a forged or stale word changes nothing), it
        leaves the fleet now, not at the next whole listing, and nova's next periodic
        deletes its compute node record and provider (nova's orphan handling, as at its
        own listing); whether it left."""
        with self._lock:
            if uuid not in self.view.nodes or uuid in self._deleted:
                return False
            filters = dict(self._filters)
        try:
            if self._held(uuid, filters):
                LOG.warning("Ironic's notification says node %s was deleted, but Ironic "
                            "still holds it in this service's scope: kept", uuid)
                return False
        except exception.VirtDriverNotReady:
            return False  # logged; the next whole listing or check tells
        with self._lock:
            self._deleted[uuid] = self.clock()
            self.view.nodes.pop(uuid, None)
            self.seen.pop(uuid, None)
        LOG.info("node %s deleted in Ironic (its notification, and Ironic no longer holds "
                 "it): out of nova's node cache at the next refresh", uuid)
        return True

    def _held(self, uuid, filters):
        """Whether Ironic has node ``uuid`` in the scope ``filters`` (one read)."""
        connection = self._connection()
        self._requests.labels("check").inc()
        try:
            response = connection.get(
                f"/nodes/{uuid}", params={"fields": ",".join(["uuid", *filters])},
                microversion=self._microversion(connection),
                headers={"Accept": "application/json"})
            if response.status_code == 404:
                return False
            sdk_exc.raise_from_response(response)
        except Exception as e:
            LOG.error("An unknown error has occurred when trying to get node %s from the "
                      "Ironic inventory. Error: %s", uuid, e)
            raise exception.VirtDriverNotReady() from e
        node = response.json()
        # Ironic keeps conductor groups in lower case, whatever nova's option says
        return all(str(node.get(key) or "").lower() == str(value).lower()
                   for key, value in filters.items())

    @staticmethod
    def _microversion(connection):
        # openstacksdk's own choice for a node listing (the highest both speak)
        return sdk_utils.maximum_supported_microversion(connection,
                                                        sdk_node.Node._max_microversion)

    def _written_since(self, key, since, filters, clocks, spent):
        """The nodes written (``key``: updated_at or created_at) at or after ``since``,
        newest first, and the rest of the last page read: every field of each, as
        only then does Ironic's list carry the time stamps."""
        sorted_params = dict(filters, sort_key=key, sort_dir="desc")
        return self._pages(sorted_params, CHANGES_PAGES, "changes", clocks,
                           lambda page: fleet_listing.read_on(page, key, since), spent=spent)

    def _pages(self, params, limit, listing, clocks, read_on=lambda page: True, build=None,
               spent=None):
        """Every node of the listing's pages (``limit``: each page's, or (the first's, the
        others')) (``build(raw)`` of each; an openstacksdk node by default), read while
        Ironic's answer links a next page and ``read_on(page)``; Ironic's clock at each
        answer goes on ``clocks``; ``spent``: [the bytes of the answers so far, the most
        they may come to with the next page (else OverBudget)]."""
        connection = self._connection()
        marker = None
        behind = []  # the last page's nodes up to the marker, each a marker in its place
        first, limit = limit if isinstance(limit, tuple) else (limit, limit)
        try:
            microversion = self._microversion(connection)
            while True:
                asked = limit if marker else first
                query = dict(params, limit=asked, **({"marker": marker} if marker else {}))
                # the list of every field is /nodes/detail; /nodes with no fields asked
                # is a summary (no properties, traits, class, time stamps)
                path = "/nodes" if "fields" in params else "/nodes/detail"
                response = connection.get(path, params=query, microversion=microversion,
                                          headers={"Accept": "application/json"})
                self._requests.labels(listing).inc()
                if marker and _marker_gone(response, marker) and len(behind) > 1:
                    # The marker node was deleted since its page was read (a mass
                    # decommission): Ironic cannot find where to read on.  The node before
                    # it on that page marks a place as good: the nodes between are those
                    # found deleted, so none is read twice.
                    LOG.info("node listing: the next page's marker %s is gone from Ironic; "
                             "reading on from the node before it", marker)
                    behind.pop()
                    marker = behind[-1]
                    continue
                sdk_exc.raise_from_response(response)
                clocks.append(fleet_listing.http_date(response.headers.get("Date")))
                if spent is not None:
                    spent[0] += len(response.content)
                body = response.json()
                page = [build(raw) if build else sdk_node.Node.existing(
                    microversion=microversion, connection=connection._get_connection(),
                    **raw) for raw in body["nodes"]]
                yield from page
                # Ironic links the next page while a page is as long as its limit, which
                # is the page asked or its [api] max_limit, whichever is less.
                if not page or not body.get("next") or not read_on(page):
                    return
                if spent is not None and (spent[0] + len(response.content) / len(page) * limit
                                          > spent[1]):
                    raise OverBudget()  # past the first page, more than the whole
                behind = [raw["uuid"] for raw in body["nodes"]]
                marker = behind[-1]
        except OverBudget:
            raise
        except Exception as e:
            # nova's own answer to a listing that fails (its _get_node_list)
            LOG.error("An unknown error has occurred when trying to get the list of nodes "
                      "from the Ironic inventory. Error: %s", e)
            raise exception.VirtDriverNotReady() from e


def _marker_gone(response, marker):
    """Whether Ironic's answer says the page's marker node no longer exists (it looks the
    marker up first: 404, "Node <uuid> could not be found")."""
    return response.status_code == 404 and marker in response.text
