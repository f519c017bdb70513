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

"""The group's record (``group_record``) in nova's own API database (nova's test
fixture: the real schema on sqlite), through nova's real Aggregate objects."""

import nova.conf
import pytest
from nova import context as nova_context
from nova import objects
from nova import rpc
from nova.tests import fixtures as nova_fixtures

from rp_reporter.nova_compute import group_record

CONF = nova.conf.CONF


class Notifier:
    """nova's notifier, as far as aggregates' notifications go: what was sent."""

    def __init__(self):
        self.sent = []

    def prepare(self, **kwargs):
        return self

    @staticmethod
    def is_enabled():
        return True

    def info(self, ctxt, event_type, payload):
        self.sent.append(event_type)


@pytest.fixture
def api_database(monkeypatch):
    CONF([], project="nova")
    CONF.set_override("connection", "sqlite://", group="api_database")
    objects.register_all()
    database = nova_fixtures.Database(database="api")
    database.setUp()
    monkeypatch.setattr(rpc, "LEGACY_NOTIFIER", Notifier())
    monkeypatch.setattr(rpc, "NOTIFIER", Notifier())
    yield nova_context.get_admin_context()
    database.cleanUp()
    CONF.reset()


def test_members_and_whom_a_mover_forced_down_are_kept_in_nova(api_database):
    ctxt = api_database
    record, other = group_record.GroupRecord("nova-a"), group_record.GroupRecord("nova-b")
    assert record.members(ctxt) == set() and record.forced_down_by_mover(ctxt, "h2") is None
    for host in ("H1", "h2", "H1"):
        record.join(ctxt, host)
    other.join(ctxt, "h9")
    assert record.members(ctxt) == {"h1", "h2"} and other.members(ctxt) == {"h9"}
    record.forced_down(ctxt, "h2", "H1")
    # Found again whole: nova's search by metadata carries the matching key alone.
    assert record.forced_down_by_mover(ctxt, "h2") == "H1"
    assert record.forced_down_by_mover(ctxt, "H1") is None
    assert other.forced_down_by_mover(ctxt, "h2") is None
    record.cleared(ctxt, "h2")
    assert record.forced_down_by_mover(ctxt, "h2") is None
    assert record.members(ctxt) == {"h1", "h2"}  # a member still
    (aggregate,) = objects.AggregateList.get_all(ctxt).objects[:1]
    assert aggregate.name == "rp-reporter-compute-nova-a"
    # No scheduling metadata: no availability zone, no filter key.
    assert aggregate.metadata == {group_record.GROUP_KEY: "nova-a"}
