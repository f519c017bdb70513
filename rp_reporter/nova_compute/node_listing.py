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
stamps only then.  A failure is nova's: logged, and ``VirtDriverNotReady`` (nova's
periodic then skips its run); a whole listing's made beside nova's periodic is logged,
and the next refresh starts another.
"""

import datetime
import logging
import threading
import time

from nova import exception
from openstack import exceptions as sdk_exc
from openstack import utils as sdk_utils
from openstack.baremetal.v1 import node as sdk_node

from rp_reporter import fleet_listing

LOG = logging.getLogger(__name__)
FULL_PAGE = 1000  # Ironic's [api] max_limit by default: larger pages are cut to it
CHANGES_PAGE = 50  # most refreshes find a handful of nodes written since (every field)
# nova's names of its filters and Ironic's (openstacksdk's query mapping renames some).
FIELD_NAMES = {"id": "uuid", "instance_id": "instance_uuid", "is_maintenance": "maintenance"}


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
                        "the next node refresh starts another", e.__cause__ or e)
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
                 in_background=in_a_thread):
        self._connection = connection  # () -> nova's openstacksdk baremetal proxy
        self.view = fleet_listing.FleetView(full_every_s)
        self._requests = requests_counter  # a Prometheus counter, by listing
        self.clock = clock
        self._in_background = in_background  # (work) -> None, work run off nova's path
        self._lock = threading.Lock()  # one listing at a time: the periodic's, a build's
        self._whole = None  # the whole listing under way, or done and not yet taken

    def nodes(self, fields, **filters):
        """Every node of the fleet (nova's ``fields`` of each; ``filters``: nova's
        shard and conductor group), as of now."""
        with self._lock:
            now = self.clock()
            if self.view.since is None:  # the service's first: nova has no fleet yet
                whole = WholeListing(now)
                whole.nodes = self._list_whole(whole, fields, filters)
                self._take(whole)
                return list(self.view.nodes.values())
            self._take_if_done()  # if it failed, the whole listing is still due:
            if self._whole is None and self.view.full_due(now):
                whole = self._whole = WholeListing(now)
                self._in_background(
                    lambda: whole.run(lambda: self._list_whole(whole, fields, filters)))
                self._take_if_done()  # (done already where run at once)
            since = self.view.since
            clocks = [datetime.datetime.now(datetime.timezone.utc)]  # Ironic's follows
            changed = [*self._written_since("updated_at", since, filters, clocks),
                       *self._written_since("created_at", since, filters, clocks)]
            self.view.took_changes(changed, clocks[:2])
            LOG.debug("nova's node refresh: %d nodes written in Ironic since %s",
                      len({node.id for node in changed}), since.isoformat())
            return list(self.view.nodes.values())

    def _list_whole(self, whole, fields, filters):
        """The whole fleet, nova's fields of each node (Ironic's clock on ``whole``)."""
        fields = ",".join(FIELD_NAMES.get(f, f) for f in fields)
        nodes = list(self._pages(dict(filters, fields=fields), FULL_PAGE, "full",
                                 whole.clocks))
        LOG.info("nova's node refresh: the whole fleet listed, %d nodes in %.1f s (once a "
                 "full pass: the listing that sees nodes deleted or moved out; the others "
                 "list the nodes written since)", len(nodes), self.clock() - whole.started)
        return nodes

    def _take_if_done(self):
        """Takes the whole listing made beside nova's periodic, once it is over."""
        if self._whole is not None and self._whole.done.is_set():
            whole, self._whole = self._whole, None
            if whole.nodes is not None:
                self._take(whole)

    def _take(self, whole):
        self.view.took_full(whole.nodes, whole.started, whole.clocks[:2])

    def reset(self):
        """Forget the fleet: the next listing lists it whole."""
        with self._lock:
            self.view = fleet_listing.FleetView(self.view.full_every_s, self.view.slack_s)
            self._whole = None  # one under way is left to end unread

    def exists(self, uuid):
        """Whether Ironic still has node ``uuid``; a node it no longer has leaves the
        fleet now rather than at the next whole listing."""
        self._requests.labels("check").inc()
        try:
            self._connection().get_node(uuid, fields=("uuid",))
        except sdk_exc.NotFoundException:
            with self._lock:
                self.view.nodes.pop(uuid, None)
            LOG.info("Node %s is gone from Ironic: out of nova's node cache at its next "
                     "refresh", uuid)
            return False
        except Exception:  # noqa: BLE001 - Ironic unreachable: nova's own read will say
            return True
        return True

    def _written_since(self, key, since, filters, clocks):
        """The nodes written (``key``: updated_at or created_at) at or after ``since``,
        newest first, and the rest of the last page read: every field of each, as
        only then does Ironic's list carry the time stamps."""
        sorted_params = dict(filters, sort_key=key, sort_dir="desc")
        return self._pages(sorted_params, CHANGES_PAGE, "changes", clocks,
                           lambda page: fleet_listing.read_on(page, key, since))

    def _pages(self, params, limit, listing, clocks, read_on=lambda page: True):
        """Every node of the listing's pages, read while each page is whole and
        ``read_on(page)``; Ironic's clock at each answer goes on ``clocks``."""
        connection = self._connection()
        marker = None
        try:
            # openstacksdk's own choice for a node listing (the highest both speak)
            microversion = sdk_utils.maximum_supported_microversion(
                connection, sdk_node.Node._max_microversion)
            while True:
                query = dict(params, limit=limit, **({"marker": marker} if marker else {}))
                # the list of every field is /nodes/detail; /nodes with no fields asked
                # is a summary (no properties, traits, class, time stamps)
                path = "/nodes" if "fields" in params else "/nodes/detail"
                response = connection.get(path, params=query, microversion=microversion,
                                          headers={"Accept": "application/json"})
                self._requests.labels(listing).inc()
                sdk_exc.raise_from_response(response)
                clocks.append(fleet_listing.http_date(response.headers.get("Date")))
                page = [sdk_node.Node.existing(microversion=microversion,
                                               connection=connection._get_connection(),
                                               **raw) for raw in response.json()["nodes"]]
                yield from page
                if len(page) < limit or not read_on(page):
                    return
                marker = page[-1].id
        except Exception as e:
            # nova's own answer to a listing that fails (its _get_node_list)
            LOG.error("An unknown error has occurred when trying to get the list of nodes "
                      "from the Ironic inventory. Error: %s", e)
            raise exception.VirtDriverNotReady() from e
