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

import pytest

from rp_reporter.sync import events

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"


def payload(**data):
    return {"ironic_object.name": "NodePayload", "ironic_object.data": {"uuid": NODE, **data}}


@pytest.mark.parametrize("event", sorted(events.EVENT_TYPES))
def test_node_end_events_name_their_node(event):
    assert events.node_uuid(event, payload(maintenance=True)) == NODE


def test_uuid_is_canonicalized():
    assert events.node_uuid("baremetal.node.update.end",
                            {"ironic_object.data": {"uuid": NODE.upper()}}) == NODE


@pytest.mark.parametrize("event_type, body, reason", [
    ("baremetal.node.update.start", payload(), "unexpected event type"),
    ("baremetal.port.create.end", payload(), "unexpected event type"),
    (None, payload(), "unexpected event type"),
    ("baremetal.node.update.end", "text", "not an object"),
    ("baremetal.node.update.end", [], "not an object"),
    ("baremetal.node.update.end", {}, "no ironic_object.data"),
    ("baremetal.node.update.end", {"ironic_object.data": "x"}, "no ironic_object.data"),
    ("baremetal.node.update.end", payload(uuid="../../etc/passwd"), "not a UUID"),
    ("baremetal.node.update.end", payload(uuid=None), "not a UUID"),
    ("baremetal.node.update.end", payload(uuid=["x"]), "not a UUID"),
    ("baremetal.node.update.end",
     {"ironic_object.data": {f"f{i}": i for i in range(500)}}, "fields"),
])
def test_bad_messages_are_refused_with_a_reason(event_type, body, reason):
    with pytest.raises(events.BadNotification, match=reason):
        events.node_uuid(event_type, body)


def test_filter_matches_exactly_the_taken_events():
    import re
    pattern = re.compile(events.EVENT_TYPE_FILTER)
    assert all(pattern.match(e) for e in events.EVENT_TYPES)
    for other in ("baremetal.node.update.start", "baremetal.node.update.end.x",
                  "xbaremetal.node.update.end", "baremetal.node.console_set.end"):
        assert not pattern.match(other)


def test_endpoint_hands_on_good_and_counts_bad():
    good, bad = [], []
    endpoint = events.NotificationEndpoint(lambda *a: good.append(a), bad.append)
    endpoint.info({}, "ironic", "baremetal.node.update.end", payload(),
                  {"timestamp": "2026-11-21 16:00:00.500000"})
    endpoint.info({}, "ironic", "baremetal.node.update.end", "junk", {})
    assert good == [(NODE, "baremetal.node.update.end", 1795276800.5)]
    assert len(bad) == 1 and "not an object" in bad[0]


@pytest.mark.parametrize("metadata", [{}, {"timestamp": "yesterday"}, {"timestamp": None}])
def test_unreadable_timestamps_give_none(metadata):
    assert events.sent_at(metadata) is None
