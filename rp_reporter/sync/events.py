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

"""Ironic's versioned notifications -> which node to sync.

Only ``.end`` events of the node changes that matter are taken; the payload is
used for one thing, the node uuid, because the sync re-reads the node from
Ironic: a stale, duplicated or reordered event can never roll Placement back.
Everything else about a message is checked and a bad one costs that message
only (one log line and a metric).

Each agent listens in its own oslo.messaging listener pool, so several agents
on one topic each get every message instead of splitting them.  A pool queue
outlives its agent; bound it with a RabbitMQ policy on the pool-name pattern
(see doc/source/install/agent.md: expiry and max-length), and reconcile repairs what it drops.
"""

import datetime
import logging
import uuid as uuidlib

import oslo_messaging

from rp_reporter import conf as rp_conf

LOG = logging.getLogger(__name__)

NODE_EVENTS = ("create", "update", "delete", "maintenance_set", "provision_set", "power_set")
EVENT_TYPES = frozenset(f"baremetal.node.{e}.end" for e in NODE_EVENTS)
EVENT_TYPE_FILTER = r"^baremetal\.node\.(" + "|".join(NODE_EVENTS) + r")\.end$"
MAX_PAYLOAD_KEYS = 200  # an Ironic node payload has about 60 fields


class BadNotification(ValueError):
    """Why a message was refused, in one line."""


def node_uuid(event_type, payload):
    """The node a notification is about, or BadNotification."""
    if event_type not in EVENT_TYPES:
        raise BadNotification(f"unexpected event type {str(event_type)[:80]!r}")
    if not isinstance(payload, dict):
        raise BadNotification(f"payload is a {type(payload).__name__}, not an object")
    data = payload.get("ironic_object.data")
    if not isinstance(data, dict):
        raise BadNotification("payload has no ironic_object.data object")
    if len(data) > MAX_PAYLOAD_KEYS:
        raise BadNotification(f"payload has {len(data)} fields")
    raw = data.get("uuid")
    try:
        return str(uuidlib.UUID(raw))
    except (TypeError, ValueError, AttributeError):
        raise BadNotification(f"node uuid {str(raw)[:64]!r} is not a UUID") from None


def sent_at(metadata):
    """The publisher's timestamp (epoch seconds), or None."""
    try:
        stamp = datetime.datetime.fromisoformat(str(metadata["timestamp"]))
    except (KeyError, TypeError, ValueError):
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)  # oslo.messaging sends UTC
    return stamp.timestamp()


class NotificationEndpoint:
    """oslo.messaging endpoint: validates and hands the node uuid on."""

    filter_rule = oslo_messaging.NotificationFilter(event_type=EVENT_TYPE_FILTER)

    def __init__(self, on_node, on_bad=None):
        self._on_node = on_node  # (uuid, event_type, sent_at) -> None
        self._on_bad = on_bad or (lambda reason: None)

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        try:
            uuid = node_uuid(event_type, payload)
        except BadNotification as e:
            LOG.warning("dropped notification from %s: %s", str(publisher_id)[:64], e)
            self._on_bad(str(e))
            return oslo_messaging.NotificationResult.HANDLED
        self._on_node(uuid, event_type, sent_at(metadata if isinstance(metadata, dict) else {}))
        return oslo_messaging.NotificationResult.HANDLED


def listener(conf, endpoint, pool=None):
    """A started notification listener in this agent's own pool (``pool``: another
    listener's own, beside the agent's on the same host)."""
    transport = oslo_messaging.get_notification_transport(conf, url=rp_conf.bus_url(conf))
    targets = [oslo_messaging.Target(topic=conf.notifications.topic,
                                     exchange=conf.notifications.exchange)]
    server = oslo_messaging.get_notification_listener(
        transport, targets, [endpoint], executor="threading",
        pool=pool or conf.notifications.pool or f"rp_reporter.{conf.host}")
    server.start()
    return server
