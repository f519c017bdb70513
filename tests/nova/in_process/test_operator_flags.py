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

"""An operator's flag after a mover's (``operator_flags``): nova's own service.update,
emitted by nova's Service as its save emits it, on oslo.messaging's in-process bus,
reaches the listener; a user's save hands the flag to the operator, nova's admin
context (a mover's save, the service's own) does not."""

import time
import uuid

import oslo_messaging
import pytest
from nova import context as nova_context
from nova import objects
from nova import rpc
from nova.objects import fields

from rp_reporter.nova_compute import operator_flags
from tests.nova.in_process.test_driver import CONF
from tests.nova.in_process.test_driver import HOSTS
from tests.nova.in_process.test_driver import a_record
from tests.nova.in_process.test_driver import nova_config  # noqa: F401 - a fixture


def messaging_options():
    """oslo.messaging's options, as nova's start-up registers them (nova.config)."""
    oslo_messaging.set_transport_defaults("nova")
    oslo_messaging.get_notification_transport(CONF, url="fake:/")


@pytest.fixture
def nova_bus(nova_config, monkeypatch):  # noqa: F811 - the fixture imported above
    """nova's notifier as a deployment sets it (versioned, messagingv2) on an in-process
    bus; the listener takes nova's transport (one in-process bus is one transport)."""
    messaging_options()
    CONF.set_override("transport_url", "fake:/")
    CONF.set_override("notification_format", "versioned", group="notifications")
    CONF.set_override("driver", ["messagingv2"], group="oslo_messaging_notifications")
    rpc.init(CONF)
    monkeypatch.setattr(oslo_messaging, "get_notification_transport",
                        lambda conf, **kw: rpc.NOTIFICATION_TRANSPORT)
    yield
    rpc.cleanup()
    for name, group in (("transport_url", None), ("notification_format", "notifications"),
                        ("driver", "oslo_messaging_notifications")):
        CONF.clear_override(name, group=group)


def saved(ctxt, host, forced_down=True):
    """nova's notification of a save of compute service ``host``, under ``ctxt``."""
    service = objects.Service(
        context=ctxt, host=host, binary="nova-compute", topic="compute", report_count=7,
        disabled=False, disabled_reason=None, availability_zone="nova", last_seen_up=None,
        forced_down=forced_down, uuid=str(uuid.uuid4()))  # version: nova's own
    service._send_notification(fields.NotificationAction.UPDATE)


def until(condition, timeout=10):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def an_operator():
    return nova_context.RequestContext(user_id="operator", project_id="admin",
                                       is_admin=True)


def test_an_operators_down_on_a_service_a_mover_forced_down_is_the_operators(nova_bus):
    record = a_record(HOSTS)
    record.forced_down(HOSTS[1], HOSTS[0])
    record.forced_down(HOSTS[2], HOSTS[0])
    listener = operator_flags.listen(record)
    try:
        assert until(lambda: listener.server is not None)
        # the mover's own save, and a restarted service's: nova's admin context
        saved(nova_context.get_admin_context(), HOSTS[2])
        # the operator's `openstack compute service set --down`, a no-op in the database
        saved(an_operator(), HOSTS[1])
        assert until(lambda: HOSTS[1] not in record.movers())
        time.sleep(0.5)  # the admin context's save was delivered first, and dropped
    finally:
        listener.stop()
    assert record.movers() == {HOSTS[2]: HOSTS[0]}


def test_a_users_save_is_told_from_nova_s_admin_context():
    payload = {"nova_object.data": {"host": "compute-b", "binary": "nova-compute"}}
    assert operator_flags.users_save(an_operator().to_dict(), payload) == "compute-b"
    assert operator_flags.users_save(nova_context.get_admin_context().to_dict(),
                                     payload) is None
    scheduler = {"nova_object.data": {"host": "compute-b", "binary": "nova-scheduler"}}
    assert operator_flags.users_save(an_operator().to_dict(), scheduler) is None
    assert operator_flags.users_save(an_operator().to_dict(), {}) is None


def test_without_versioned_notifications_the_gap_is_said(nova_config, caplog):  # noqa: F811
    messaging_options()
    assert CONF.notifications.notification_format == "unversioned"  # nova's default
    assert operator_flags.listen(a_record(HOSTS)) is None
    assert "nova sends no versioned notifications here" in caplog.text
