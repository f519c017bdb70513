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

"""Ironic's notifications of deleted nodes, for nova's node refresh listing what changed.

A listing of the nodes written since cannot see a node deleted: without a word from
Ironic, a deleted node stays in nova's cache (its compute node record and provider
kept) until the next whole listing, up to a full pass, where stock nova's listing drops
it at its next periodic.  Where rp_reporter's configuration (``[rp_reporter]
config_file``) names the bus Ironic notifies on (its ``[notifications]``, as the agents
read it), each nova-compute listens for ``baremetal.node.delete.end`` in a pool of its
own (``rp_reporter.nova-compute.<host>``: every service gets every message, beside an
agent's pool on the same host) and hands the node to ``NodeListing.deleted``, which
reads Ironic before it believes the word.
"""

import logging
import threading

import oslo_messaging

from rp_reporter import conf as rp_conf

LOG = logging.getLogger(__name__)
DELETE = "baremetal.node.delete.end"


class Listener:
    """The listener, started on a thread of its own: oslo.messaging's start waits for
    the bus, and nova-compute's start must not (a bus down costs the notifications
    only: the next whole listing drops a deleted node all the same)."""

    def __init__(self, start, name="rp_reporter-deleted-nodes"):
        self.server = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(start,), name=name,
                                        daemon=True)
        self._thread.start()

    def _run(self, start):
        server = start()
        self.server = server
        if self._stopped.is_set():  # stopped while it waited for the bus
            self.stop()

    def stop(self):
        self._stopped.set()
        server, self.server = self.server, None
        if server is not None:
            server.stop()
            server.wait()


def listen(conf, host, listing):
    """A Listener of ``conf``'s bus for ``listing`` (a NodeListing), or None where
    ``conf`` names no bus."""
    if not rp_conf.bus_url(conf):
        return None
    from rp_reporter.sync import events  # only now: oslo.messaging's listener is heavy

    def on_node(uuid, event_type, sent_at):
        try:
            listing.deleted(uuid)
        except Exception:  # noqa: BLE001 - the next whole listing tells all the same
            LOG.exception("node %s: Ironic's notification of its delete not taken (the next "
                          "whole listing drops it)", uuid)

    endpoint = events.NotificationEndpoint(on_node)
    endpoint.filter_rule = oslo_messaging.NotificationFilter(
        event_type=r"^baremetal\.node\.delete\.end$")

    def start():
        server = events.listener(conf, endpoint, pool=f"rp_reporter.nova-compute.{host}")
        LOG.info("listening for Ironic's notifications of deleted nodes on topic %s: a "
                 "node deleted leaves nova's node cache at the next refresh",
                 conf.notifications.topic)
        return server
    return Listener(start)
