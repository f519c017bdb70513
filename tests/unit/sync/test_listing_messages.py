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

"""What a member keeps off the bus: a well-formed, bounded, signed message, and
nothing else, whatever arrives (listing_messages.parse)."""

import json
import math

import hypothesis.strategies as st
import pytest
from hypothesis import given
from hypothesis import settings

from rp_reporter.sync import listing_messages as lm
from rp_reporter.sync import shared_listing as sl

KEYS = ["k-current"]
CONTEXT = sl.Context(("agent-0", "agent-1"), (None, "s1"), ("traits", "uuid"), (1024, "sha256"),
                     "deployment-hash").as_dict()
LISTING = (1000.0, "agent-0", 1)


def page(**over):
    message = lm.page_message(LISTING, CONTEXT, 0, [{"uuid": "n1", "traits": []}],
                              {"n1": ("n1", 3)})
    return lm.sign({**json.loads(json.dumps(message)), **over}, KEYS)


def end(**over):
    message = lm.end_message(LISTING, CONTEXT, 1, None, 2.5)
    return lm.sign({**message, **over}, KEYS)


def test_a_signed_page_and_end_are_kept_as_sent():
    kept = lm.parse(page(), KEYS)
    assert kept == lm.Page(LISTING, CONTEXT, 0, [{"uuid": "n1", "traits": []}],
                           {"n1": ("n1", 3)})
    assert lm.parse(end(), KEYS) == lm.End(LISTING, CONTEXT, 1, None, 2.5)


def test_any_key_of_the_group_verifies_so_keys_rotate():
    signed_by_old = lm.sign(lm.end_message(LISTING, CONTEXT, 1, None, 1.0), ["k-old"])
    assert lm.parse(signed_by_old, ["k-new", "k-old"]).pages == 1
    with pytest.raises(lm.Invalid, match="none of the group's keys"):
        lm.parse(signed_by_old, ["k-new"])


@pytest.mark.parametrize("forged", [
    lambda m: {k: v for k, v in m.items() if k != "mac"},           # unsigned
    lambda m: {**m, "mac": "0" * 64},                                 # a made-up signature
    lambda m: {**m, "seq": 1},                                        # changed after signing
    lambda m: {**m, "records": m["records"] + [{"uuid": "ghost"}]},   # a record slipped in
])
def test_an_unsigned_or_altered_message_is_dropped(forged):
    with pytest.raises(lm.Invalid):
        lm.parse(forged(page()), KEYS)


@pytest.mark.parametrize(("over", "why"), [
    ({"pages": None}, "pages"),
    ({"pages": -1}, "pages"),
    ({"pages": True}, "pages"),
    ({"seconds": 1e9}, "seconds"),
    ({"seconds": "2"}, "seconds"),
    ({"listing_gap": 5}, "listing_gap"),
    ({"listing_id": [1.0, "a"]}, "listing_id"),
    ({"context": {"members": []}}, "context"),
    ({"v": 1}, "version"),
    ({"kind": "start"}, "kind"),
])
def test_an_end_out_of_bounds_is_dropped_saying_what(over, why):
    with pytest.raises(lm.Invalid, match=why):
        lm.parse(end(**over), KEYS)


def test_records_and_providers_must_have_their_shape():
    with pytest.raises(lm.Invalid, match="record"):
        lm.parse(page(records=[["not", "a", "dict"]]), KEYS)
    with pytest.raises(lm.Invalid, match="provider"):
        lm.parse(page(providers={"n1": ["name"]}), KEYS)


def test_a_non_finite_number_is_dropped_not_raised():
    with pytest.raises(lm.Invalid):
        lm.parse({**end(), "seconds": math.nan}, KEYS)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30)


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, st.builds(lambda base, extra: {**base, **extra},
                                 st.sampled_from([page(), end()]),
                                 st.dictionaries(st.sampled_from(
                                     ["v", "kind", "listing_id", "context", "seq", "records",
                                      "providers", "pages", "listing_gap", "seconds", "mac"]),
                                     JSON, max_size=3))))
def test_whatever_arrives_either_parses_or_is_invalid(message):
    """Random, truncated and wrong-typed payloads: the only way out is Invalid."""
    try:
        parsed = lm.parse(message, KEYS)
    except lm.Invalid:
        return
    assert isinstance(parsed, (lm.Page, lm.End))
    assert message["mac"] == lm.sign(message, KEYS)["mac"]  # only a signed one parses
