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

"""One release of skew, either order, for every versioned format: what the current code
writes, the previous release's code (``previous_release``, pinned) reads as it read its
own, ignoring what it does not know; and what the previous release wrote, the current
code reads.  Agents and compute services of both releases share one coordination
backend and one bus while an upgrade goes one host at a time; a host's state file is
read by the release that replaced the one that wrote it, or by the older one again on
a rollback."""

import pytest

from rp_reporter import group_record
from rp_reporter import membership
from rp_reporter import state
from rp_reporter.sync import listing_messages
from tests.unit.previous_release import group_record as previous_group_record
from tests.unit.previous_release import listing_messages as previous_listing_messages
from tests.unit.previous_release import state as previous_state

KEYS = ["k-new", "k-old"]


@pytest.fixture
def backend(tmp_path):
    group = membership.Group(f"file://{tmp_path}", "nova-a", "compute-1").start()
    yield group.durable
    group.stop()


def a_record_written(module, names):
    """A group's record as ``module`` writes one: two members, one forced down by the
    other; the current module also holds one (a kind the previous one does not know)."""
    record = module.GroupRecord("nova-a", names)
    for host in ("compute-1", "compute-2"):
        record.join(host)
    record.forced_down("compute-2", "compute-1")
    if hasattr(record, "hold"):
        record.hold("compute-1", 4_000_000_000)
    return record


@pytest.mark.parametrize("writer,reader", [(group_record, previous_group_record),
                                           (previous_group_record, group_record)])
def test_the_group_record_reads_across_one_release(backend, writer, reader):
    a_record_written(writer, backend)
    read = reader.GroupRecord("nova-a", backend)
    assert read.members() == {"compute-1", "compute-2"}
    assert read.movers() == {"compute-2": "compute-1"}
    read.cleared("compute-2")  # and what it writes back reads the same way
    assert writer.GroupRecord("nova-a", backend).movers() == {}


def test_a_hold_leaves_the_previous_releases_record_as_it_was(backend):
    """The previous release's record operations (a member forgotten, a flag cleared)
    work beside a hold it cannot read, and leave the hold."""
    current = a_record_written(group_record, backend)
    previous = previous_group_record.GroupRecord("nova-a", backend)
    previous.forget("compute-2")
    assert previous.members() == {"compute-1"} and previous.movers() == {}
    assert current.holds() == {"compute-1": 4_000_000_000}


def messages(module):
    """A page and an end of one listing, signed, as ``module`` makes them."""
    listing_id = (1_795_000_000.0, "agent-1", 7)
    context = {"members": ["agent-1", "agent-2"], "scope": [None, "bm"],
               "fields": ["uuid", "resource_class"],
               "ring": {"partitions": 1024, "hash_algorithm": "sha256"},
               "deployment": "a1b2"}
    page = module.page_message(listing_id, context, 0, [{"uuid": "n1"}], {"n1": ("n1", 3)})
    end = module.end_message(listing_id, context, 1, None, 2.5)
    return [module.sign(message, KEYS) for message in (page, end)]


@pytest.mark.parametrize("writer,reader", [
    (listing_messages, previous_listing_messages),
    (previous_listing_messages, listing_messages)])
def test_the_shared_listings_messages_read_across_one_release(writer, reader):
    page, end = (reader.parse(message, KEYS[::-1]) for message in messages(writer))
    assert (page.seq, page.records, page.providers) == (0, [{"uuid": "n1"}],
                                                         {"n1": ("n1", 3)})
    assert (end.pages, end.listing_gap, end.seconds) == (1, None, 2.5)


def test_a_message_of_a_later_version_is_dropped_not_misread():
    """A message of a version this release does not know is dropped with a reason (the
    receiver then lists by itself, as for any message it drops), never parsed as its
    own."""
    page, _ = messages(listing_messages)
    later = listing_messages.sign({**page, "v": listing_messages.VERSION + 1}, KEYS)
    with pytest.raises(listing_messages.Invalid, match="version"):
        listing_messages.parse(later, KEYS)


@pytest.mark.parametrize("writer,reader", [(state, previous_state), (previous_state, state)])
def test_the_state_file_reads_across_one_release(tmp_path, writer, reader):
    identity = {"placement": "http://placement", "user": "rp"}
    base = str(tmp_path / "rp_reporter-host.json")
    writer.StateFile(base, identity).save("absent_since", {"n1": 1795000000.0})
    assert reader.StateFile(base, identity).load("absent_since") == {"n1": 1795000000.0}
