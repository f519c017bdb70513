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

"""The observation cache as a document that survives the process, and the rolling
re-verification that bounds how long a wrong entry can last.  Pure.

A cached observation is trusted while the provider listing shows the same
generation.  Every write bumps the generation, so an entry goes stale visibly,
with one exception: a provider deleted and created again with the same uuid
starts over at generation 0 and can reach the cached generation with other
content.  So every entry is also re-read at least once every ``period``
passes: entry ``u`` is due in the passes where ``bucket(u) == pass % period``,
which spreads the re-reads evenly (uuids are random) and corrects any wrong
entry within ``period`` passes.

The document stores each distinct inventory, trait and aggregate set once (a
fleet has few) and an entry as [generation, inventory index, traits index],
with an aggregates index after them where the aggregates were read (tenancy).  Anything
malformed in it raises ValueError: the caller then reads every provider
afresh, which costs time, never a wrong write.
"""

import collections.abc
import dataclasses
import sys
import threading
import uuid as uuidlib

from rp_reporter import model
from rp_reporter.sync.plan import Observed

FORMAT = 1


def bucket(uuid, period):
    return uuidlib.UUID(uuid).int % period


def due(uuid, pass_number, period):
    """Whether this pass re-reads ``uuid`` whatever the cache says."""
    return bucket(uuid, period) == pass_number % period


def dump(entries, pass_number):
    """{uuid: Observed} -> a JSON-able document."""
    inventories, traits, aggregates, rows = {}, {}, {}, {}
    for uuid, observed in entries.items():
        inv_key = tuple(sorted((rc, tuple(sorted(inv.items())))
                               for rc, inv in observed.inventories.items()))
        i = inventories.setdefault(inv_key, len(inventories))
        t = traits.setdefault(frozenset(observed.traits), len(traits))
        rows[uuid] = [observed.generation, i, t]
        if observed.aggregates is not None:
            rows[uuid].append(aggregates.setdefault(observed.aggregates, len(aggregates)))
    return {"format": FORMAT, "pass": pass_number,
            "inventories": [{rc: dict(fields) for rc, fields in key} for key in inventories],
            "traits": [sorted(t) for t in traits],
            "aggregates": [sorted(a) for a in aggregates],
            "entries": rows}


def _inventories(value):
    if not isinstance(value, dict):
        raise ValueError("an inventory set is not an object")
    for rc, inv in value.items():
        if not model.valid_name(rc) or not isinstance(inv, dict):
            raise ValueError(f"inventory {str(rc)[:64]!r} is malformed")
        for field in model.INVENTORY_FIELDS:
            if not isinstance(inv.get(field), (int, float)) or isinstance(inv.get(field), bool):
                raise ValueError(f"inventory {rc} has no numeric {field}")
    return value


def _traits(value):
    if not isinstance(value, list) or not all(model.valid_name(t) for t in value):
        raise ValueError("a trait set is malformed")
    return frozenset(value)


def _aggregates(value):
    if not isinstance(value, list):
        raise ValueError("an aggregate set is malformed")
    return frozenset(str(uuidlib.UUID(a)) for a in value)


# A document's members other than its entries: small, read whole.
PARTS = ("format", "pass", "inventories", "traits", "aggregates")


def load(document, share=None):
    """A document -> ({uuid: Observed}, pass number); ValueError if anything is off.

    Its ``entries`` may be an object or its (uuid, row) pairs as a reader streams
    them (``state.StateFile.reading``).  ``share``: an object whose ``inventories``
    and ``traits`` give the one object kept for each distinct value (the cache's),
    asked once per value of the document, not once per entry."""
    try:
        if document.get("format") != FORMAT:
            raise ValueError(f"not in format {FORMAT}")
        inventories = [_inventories(v) for v in document["inventories"]]
        traits = [_traits(v) for v in document["traits"]]
        # None (absent): a document of a version before tenancy, no aggregates read.
        aggregates = [_aggregates(v) for v in document.get("aggregates") or ()]
        if share is not None:
            inventories = [share.inventories(v) for v in inventories]
            traits = [share.traits(v) for v in traits]
            aggregates = [share.aggregates(v) for v in aggregates]
        pass_number = document["pass"]
        if not isinstance(pass_number, int) or pass_number < 0:
            raise ValueError("pass is not a count")
        rows = document["entries"]
        if isinstance(rows, dict):
            rows = rows.items()
        elif not isinstance(rows, collections.abc.Iterator):  # a reader's pairs
            raise ValueError("entries is not an object")
        entries = {}
        for uuid, (generation, i, t, *a) in rows:
            if str(uuidlib.UUID(uuid)) != uuid:
                raise ValueError(f"{uuid[:64]!r} is not a canonical uuid")
            if (not isinstance(generation, int) or generation < 0
                    or not all(isinstance(n, int) and n >= 0 for n in (i, t, *a))
                    or len(a) > 1):
                raise ValueError(f"entry {uuid} is malformed")
            uuid = sys.intern(uuid)  # the same string as the node's (model._uuid)
            entries[uuid] = Observed(uuid, generation, inventories[i], traits[t],
                                     aggregates=aggregates[a[0]] if a else None)
    except (AttributeError, KeyError, IndexError, TypeError) as e:
        raise ValueError(f"malformed observations: {type(e).__name__}: {e}") from None
    return entries, pass_number


class Interned:
    """One object for each of the few distinct inventories and trait sets a fleet
    has, so a cache of 100,000 providers holds references, not copies."""

    LIMIT = 10_000  # distinct values kept; beyond that, values are not shared

    def __init__(self):
        self._values = {}
        self._lock = threading.Lock()

    def _one(self, key, value):
        with self._lock:
            if len(self._values) >= self.LIMIT:
                return self._values.get(key, value)
            return self._values.setdefault(key, value)

    def inventories(self, inventories):
        try:
            key = tuple(sorted((rc, tuple(sorted(inv.items())))
                               for rc, inv in inventories.items()))
        except TypeError:  # a field this version does not know, and not hashable
            return inventories
        return self._one(("inventories", key), inventories)

    def traits(self, traits):
        return self._one(("traits", traits), traits)

    def aggregates(self, aggregates):
        return aggregates if aggregates is None else self._one(("aggregates", aggregates),
                                                               aggregates)

    def observed(self, observed):
        return dataclasses.replace(observed, inventories=self.inventories(observed.inventories),
                                   traits=self.traits(observed.traits),
                                   aggregates=self.aggregates(observed.aggregates))
