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

"""An operator's flag after a mover's: nova's versioned ``service.update`` notifications.

A mover records its name before it forces a service down, and the service clears the
flag at its restart only while that name is recorded (``group_record``), since nova
never clears forced_down itself.  An operator's ``openstack compute service set
--down`` of a service a mover already forced down changes nothing in nova's database,
nor does an ``--up`` then ``--down`` between two of the movers' reads: the flag would
be taken for the mover's and cleared.  The trace is nova's ``service.update``, sent
for every save of a service's flags, the unchanged one too.  Its request context says
who saved: through nova's API, a user; a mover's and the service's own saves are made
under nova's admin context, which names none.  So a user's ``service.update`` of a
compute service drops the mover's name: the flag is the operator's from then on (any
change of its flags, a disable too, hands it over; the operator lifts it).

The live members listen in one pool (nova's versioned notifications are many: one
queue for the group, each message to one member); a message whose record write fails
is requeued.  Where nova sends no versioned notifications (its default), this is said
once at start, and the gap stays as before."""

import logging

import oslo_messaging
from oslo_config import cfg

from rp_reporter.nova_compute import deleted_nodes

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
POOL = "rp_reporter.operator-flags"


def users_save(ctxt, payload):
    """The compute host whose service record a user (an operator through nova's API)
    saved, from a ``service.update`` notification's request context and payload; None
    for a save under nova's admin context (a mover's, the service's own) or of another
    binary."""
    if not (ctxt or {}).get("user_id"):
        return None
    data = (payload or {}).get("nova_object.data") or {}
    if data.get("binary") != "nova-compute" or not data.get("host"):
        return None
    return data["host"]


class Endpoint:
    """``record``: the group's record (``group_record``)."""

    filter_rule = oslo_messaging.NotificationFilter(event_type=r"^service\.update$")

    def __init__(self, record):
        self.record = record

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        host = users_save(ctxt, payload)
        if host is None:
            return None
        try:
            mover = self.record.forced_down_by_mover(host)
            if mover:
                self.record.cleared(host)
        except Exception:  # noqa: BLE001 - the backend: tried again, nothing lost
            LOG.exception("compute service %s: an operator's save of its flags not recorded "
                          "yet (the coordination backend); requeued", host)
            return oslo_messaging.NotificationResult.REQUEUE
        if mover:
            data = payload["nova_object.data"]
            LOG.warning("compute service %s: its flags saved through nova's API by user %s "
                        "(forced_down %s) after mover %s forced it down: the flag is the "
                        "operator's now, left as it is at the service's restart", host,
                        ctxt.get("user_id"), data.get("forced_down"), mover)
        return oslo_messaging.NotificationResult.HANDLED


def sends_versioned():
    """Whether nova, as configured here, sends versioned notifications."""
    drivers = [d for d in CONF.oslo_messaging_notifications.driver if d != "noop"]
    return bool(drivers) and CONF.notifications.notification_format in ("versioned", "both")


def listen(record):
    """A Listener (``deleted_nodes``) of nova's versioned notifications for the group's
    ``record``, or None where nova sends none."""
    if not sends_versioned():
        LOG.warning("nova sends no versioned notifications here ([notifications] "
                    "notification_format, [oslo_messaging_notifications] driver): an "
                    "operator's forced_down set again on a service a mover forced down is "
                    "not seen, and that service's restart clears it")
        return None

    def start():
        transport = oslo_messaging.get_notification_transport(CONF)
        targets = [oslo_messaging.Target(topic=topic)
                   for topic in CONF.notifications.versioned_notifications_topics]
        server = oslo_messaging.get_notification_listener(
            transport, targets, [Endpoint(record)], executor="threading", pool=POOL,
            allow_requeue=True)
        server.start()
        LOG.info("listening for nova's service.update notifications (pool %s): an "
                 "operator's flag on a service a mover forced down stays the operator's",
                 POOL)
        return server
    return deleted_nodes.Listener(start, name="rp_reporter-operator-flags")
