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

"""The shared listing's messages: their schema, their bounds and their signature.  Pure.

The bus that carries the lister's slices is the one every OpenStack service on the
vhost publishes on, so a message is input, not a command (architecture, invariant
11).  A member keeps a message only when ``parse`` accepts it:

* its shape and every value are within bounds (a listing id, a context, a page's
  records and providers, an end's page count, gap and seconds), so nothing of it
  can raise later in the agent's loop or hold its memory;
* it is signed with one of the group's keys (``[reconcile] shared_listing_keys``):
  an HMAC-SHA256 over the canonical JSON of everything but the signature.  The
  first key signs; every key verifies, so a key is rotated by adding the new one
  second on every agent, then first, then dropping the old one.

Who may send a listing (the ring's lister) is checked by the receiver, which knows
the ring: the sender's name is inside the signed listing id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import math

VERSION = 2
# No message on the bus is larger (RabbitMQ 4 refuses those over 16 MiB by default;
# the test broker's limit is this one).
MAX_MESSAGE_BYTES = 1 << 20
# A page is closed once it holds this many bytes of records or providers, well under
# MAX_MESSAGE_BYTES with its envelope.
PAGE_BYTES = 512 * 1024
MAX_PAGES = 1 << 20
MAX_MEMBERS = 4096
MAX_PARTITIONS = 1 << 16  # [ring] partitions per member
MAX_NAME = 255           # a host, a scope, a field, a provider's name
MAX_FIELDS = 256
MAX_GAP = 2000           # the listing gap's words
MAX_SECONDS = 7 * 86400.0
MAX_INT = (1 << 63) - 1
KINDS = ("page", "end")


class Invalid(ValueError):
    """Why a message is dropped (one short line)."""


@dataclasses.dataclass(frozen=True)
class Page:
    listing_id: tuple    # (lister's wall clock at the start, lister, pass number)
    context: dict        # as shared_listing.Context.as_dict() made it
    seq: int
    records: list        # Ironic records, each a dict with a uuid
    providers: dict      # {uuid: (name, generation)}


@dataclasses.dataclass(frozen=True)
class End:
    listing_id: tuple
    context: dict
    pages: int           # how many pages the slice has
    listing_gap: str | None
    seconds: float       # how long the lister's listing took


def canonical(message):
    """The bytes a signature covers: the message but its "mac", as canonical JSON."""
    body = {k: v for k, v in message.items() if k != "mac"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode()


def _mac(key, message):
    return hmac.new(key.encode(), canonical(message), hashlib.sha256).hexdigest()


def sign(message, keys):
    """The message with its signature by the first key."""
    return {**message, "mac": _mac(keys[0], message)}


def page_message(listing_id, context, seq, records=(), providers=None):
    return {"v": VERSION, "kind": "page", "listing_id": list(listing_id), "context": context,
            "seq": seq, "records": list(records),
            "providers": {u: list(p) for u, p in (providers or {}).items()}}


def end_message(listing_id, context, pages, listing_gap, seconds):
    return {"v": VERSION, "kind": "end", "listing_id": list(listing_id), "context": context,
            "pages": pages, "listing_gap": listing_gap, "seconds": seconds}


def size(message):
    """Its size on the bus, near enough (JSON)."""
    return len(json.dumps(message, separators=(",", ":"), default=str))


def parse(message, keys):
    """The Page or End a message carries, if it is well formed and signed with one of
    ``keys``; else Invalid saying why."""
    if not isinstance(message, dict):
        raise Invalid(f"not an object but {type(message).__name__}")
    if message.get("v") != VERSION:
        raise Invalid(f"version {_shown(message.get('v'))}, not {VERSION}")
    kind = message.get("kind")
    if kind not in KINDS:
        raise Invalid(f"kind {_shown(kind)}")
    listing_id = _listing_id(message.get("listing_id"))
    context = _context(message.get("context"))
    if kind == "page":
        parsed = Page(listing_id, context, _int(message.get("seq"), "seq", MAX_PAGES - 1),
                      _records(message.get("records")), _providers(message.get("providers")))
    else:
        parsed = End(listing_id, context, _int(message.get("pages"), "pages", MAX_PAGES),
                     _text(message.get("listing_gap"), "listing_gap", MAX_GAP, optional=True),
                     _number(message.get("seconds"), "seconds", MAX_SECONDS))
    _check_signature(message, keys)  # last: a well-formed message is worth the hash
    return parsed


def _check_signature(message, keys):
    mac = message.get("mac")
    if not isinstance(mac, str) or not mac:
        raise Invalid("unsigned")
    try:
        expected = [_mac(key, message) for key in keys]
    except (TypeError, ValueError) as e:  # not canonical JSON (a NaN, an odd key)
        raise Invalid(f"not canonical JSON: {e}") from None
    given = mac.encode("utf-8", "replace")  # compare_digest refuses non-ASCII text
    if not any(hmac.compare_digest(given, e.encode()) for e in expected):
        raise Invalid("signature matches none of the group's keys")


def _shown(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(value, what, most):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise Invalid(f"{what} {_shown(value)} is not an integer in 0..{most}")
    return value


def _number(value, what, most):
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or not 0 <= value <= most):
        raise Invalid(f"{what} {_shown(value)} is not a number in 0..{most:g}")
    return float(value)


def _text(value, what, most=MAX_NAME, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or len(value) > most:
        raise Invalid(f"{what} {_shown(value)} is not a string of at most {most} characters")
    return value


def _texts(value, what, most_items, optional_items=False):
    if not isinstance(value, list) or len(value) > most_items:
        raise Invalid(f"{what} is not a list of at most {most_items}")
    return [_text(v, what, optional=optional_items) for v in value]


def _listing_id(value):
    if not isinstance(value, list) or len(value) != 3:
        raise Invalid(f"listing_id {_shown(value)} is not [started, lister, number]")
    started, lister, number = value
    return (_number(started, "listing_id's start", 1e11), _text(lister, "listing_id's lister"),
            _int(number, "listing_id's number", MAX_INT))


def _context(value):
    """The context's shape (what it must equal is the receiver's question)."""
    if not isinstance(value, dict):
        raise Invalid("context is not an object")
    ring = value.get("ring")
    if not isinstance(ring, dict) or set(ring) != {"partitions", "hash_algorithm"}:
        raise Invalid("context's ring is not {partitions, hash_algorithm}")
    scope = _texts(value.get("scope"), "context's scope", 2, optional_items=True)
    if len(scope) != 2:
        raise Invalid("context's scope is not [conductor_group, shard]")
    return {"members": _texts(value.get("members"), "context's members", MAX_MEMBERS),
            "scope": scope,
            "fields": _texts(value.get("fields"), "context's fields", MAX_FIELDS),
            "ring": {"partitions": _int(ring["partitions"], "context's partitions",
                                           MAX_PARTITIONS),
                     "hash_algorithm": _text(ring["hash_algorithm"], "context's hash")},
            "deployment": _text(value.get("deployment"), "context's deployment")}


def _records(value):
    if not isinstance(value, list):
        raise Invalid("records is not a list")
    for record in value:
        if not isinstance(record, dict) or not isinstance(record.get("uuid"), str):
            raise Invalid("a record is not an object with a uuid")
    return value


def _providers(value):
    if not isinstance(value, dict):
        raise Invalid("providers is not an object")
    found = {}
    for uuid, provider in value.items():
        if (not isinstance(provider, list) or len(provider) != 2
                or not isinstance(provider[0], str)
                or isinstance(provider[1], bool) or not isinstance(provider[1], int)):
            raise Invalid(f"provider {_shown(uuid)} is not [name, generation]")
        found[_text(uuid, "a provider's uuid")] = (provider[0], provider[1])
    return found
