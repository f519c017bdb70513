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

"""Placement: the bulk read, per-provider reads, and generation-guarded writes.

Every write carries the provider generation; a stale one comes back as
``Conflict`` with Placement's error code, for the caller to re-read and
re-plan.  Connection errors and 5xx answers are retried here (bounded,
jittered); nothing else is.
"""

import collections
import logging
import sys
import threading
import urllib.parse
import uuid as uuidlib

import ijson
import requests
import tenacity
from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import errors
from rp_reporter import model
from rp_reporter.sync.plan import Observed

LOG = logging.getLogger(__name__)

# 1.26: reserved may equal total (how a used node is marked); 1.20: POST
# returns the provider; 1.18: list providers by required trait.
MICROVERSION = "1.26"
RESHAPER_MICROVERSION = "1.30"
CONCURRENT_UPDATE = "placement.concurrent_update"
LISTING_CHUNK = 256 * 1024  # bytes of the provider listing parsed at a time


class PlacementError(errors.ServiceError):
    """Placement answered an error (or none): the method, path, status and its code."""

    kind = errors.FAILED

    def __init__(self, method, url, status, code=None, detail=""):
        self.status, self.code = status, code
        super().__init__("placement", self.kind,
                         f"Placement {method} {url}: {status} {code or ''} {detail}".strip())


class Conflict(PlacementError):
    """409: a stale generation (code placement.concurrent_update) or a refused change."""


class Unavailable(PlacementError):
    """Placement could not be reached, or kept answering 5xx."""

    kind = errors.UNAVAILABLE


class Denied(PlacementError):
    """403: the user lacks a role or the right scope (the message says which)."""

    kind = errors.DENIED


class Unauthorized(PlacementError):
    """401: Placement does not take the token (wrong Keystone, or a revoked user)."""

    kind = errors.MISCONFIGURED


def _quote(name):
    # Names reach a URL only after validation; quoting is a second guard.
    return urllib.parse.quote(name, safe="")


def _rp(uuid, tail=""):
    """A provider's path; only a canonical UUID gets into it."""
    try:
        canonical = str(uuidlib.UUID(uuid))
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"refusing to send non-UUID {str(uuid)[:64]!r} to Placement") from None
    return f"/resource_providers/{canonical}{tail}"


def _checked(name):
    if not model.valid_name(name):
        raise ValueError(f"refusing to send invalid name {name[:64]!r} to Placement")
    return name


class PlacementClient:
    """A thin, counted, retrying wrapper around a keystoneauth1 Adapter."""

    def __init__(self, adapter, attempts=5, backoff_max=4.0, write_guard=None):
        self._adapter = adapter
        self.requests = collections.Counter()  # by HTTP method
        self._count_lock = threading.Lock()
        self._known_classes = set()
        self._known_traits = set()
        self._names_lock = threading.Lock()  # one creation per name, not one per thread
        # Called before every write is sent, retries included: the agent's raises
        # errors.Fenced once its membership lapsed, so no write goes out after the
        # fencing deadline however long a retry loop runs.
        self.write_guard = write_guard or (lambda: None)
        self._retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Unavailable),
            stop=tenacity.stop_after_attempt(attempts),
            wait=tenacity.wait_random_exponential(multiplier=0.1, max=backoff_max),
            before_sleep=self._log_retry,
            reraise=True)

    @property
    def adapter(self):
        return self._adapter

    @staticmethod
    def _log_retry(state):
        LOG.warning("retrying after: %s", state.outcome.exception())

    # -- transport -------------------------------------------------------
    def _request(self, method, url, expect, json=None, microversion=MICROVERSION):
        return self._retrying(self._request_once, method, url, expect, json, microversion)

    def _request_once(self, method, url, expect, json, microversion, stream=False):
        if method != "GET":
            self.write_guard()
        with self._count_lock:
            self.requests[method] += 1
        try:
            resp = self._adapter.request(
                url, method, json=json, raise_exc=False, stream=stream,
                headers={"OpenStack-API-Version": f"placement {microversion}",
                         "Accept": "application/json"})
        except (ksa_exc.ConnectionError, ksa_exc.RetriableConnectionFailure) as e:
            raise Unavailable(method, url, "unreachable", detail=str(e)) from None
        except ksa_exc.ClientException as e:  # Keystone: credentials, catalog, scope
            raise errors.from_keystone("placement", e) from None
        if resp.status_code in expect:
            return resp
        code, detail = None, resp.text[:300]
        try:
            error = resp.json()["errors"][0]
            code, detail = error.get("code"), error.get("detail", "").strip()[:300]
        except (ValueError, KeyError, IndexError, TypeError):
            pass
        if resp.status_code == 403:
            detail += ": " + errors.denied_hint("placement", errors.system_scoped(self._adapter))
        exc = {409: Conflict, 403: Denied, 401: Unauthorized}.get(
            resp.status_code, Unavailable if resp.status_code >= 500 else PlacementError)
        raise exc(method, url, resp.status_code, code, detail)

    # -- reads -----------------------------------------------------------
    def list_providers(self, required_trait=model.MANAGED_TRAIT):
        """{uuid: (name, generation)} of every provider carrying the trait, in one request."""
        url = "/resource_providers"
        if required_trait:
            url += "?required=" + _quote(_checked(required_trait))
        try:
            return self._retrying(self._read_listing, url)
        except PlacementError as e:
            if e.status == 400 and "No such trait" in str(e):
                return {}  # the marker does not exist yet: nothing is managed so far
            raise

    def _read_listing(self, url):
        """Placement does not page this listing, so it is parsed as it arrives, one
        provider at a time: parsed whole, a large fleet's listing would be held in
        memory several times over."""
        resp = self._request_once("GET", url, (200,), None, MICROVERSION, stream=True)
        listed = {}
        found = ijson.sendable_list()
        parser = ijson.items_coro(found, "resource_providers.item")
        try:
            for chunk in resp.iter_content(LISTING_CHUNK):
                parser.send(chunk)
                for rp in found:
                    uuid, name = sys.intern(rp["uuid"]), rp["name"]  # as model's uuids
                    # Named after its node's uuid, as is usual: one string for both.
                    listed[uuid] = (uuid if name == uuid else name, rp["generation"])
                del found[:]
            parser.close()
        except (requests.RequestException, ijson.JSONError) as e:
            raise Unavailable("GET", url, "answer cut short", detail=str(e)) from None
        finally:
            resp.close()
        return listed

    def observe(self, uuid, aggregates=False):
        """Observed inventories and traits (and with ``aggregates``, its aggregates) of
        one provider, or None if it does not exist.

        A read each; repeated if a write slipped in between them.
        """
        tails = ("/inventories", "/traits") + (("/aggregates",) if aggregates else ())
        for _ in range(5):
            answers = []
            for tail in tails:
                resp = self._request("GET", _rp(uuid, tail), (200, 404))
                if resp.status_code == 404:
                    return None
                answers.append(resp.json())
            if len({a["resource_provider_generation"] for a in answers}) == 1:
                inv, tr, *agg = answers
                return Observed(uuid, inv["resource_provider_generation"],
                                inv["inventories"], frozenset(tr["traits"]),
                                aggregates=frozenset(agg[0]["aggregates"]) if agg else None)
        raise Conflict("GET", _rp(uuid), 409, CONCURRENT_UPDATE,
                       "provider kept changing while being read")

    def max_microversion(self):
        """Placement's highest microversion, as (major, minor)."""
        (version,) = self._request("GET", "/", (200,)).json()["versions"]
        major, minor = version["max_version"].split(".")
        return int(major), int(minor)

    def probe(self):
        """A listing that names no provider: these credentials may still list."""
        self._request("GET", "/resource_providers?name=rp-reporter-probe", (200,))

    def get_provider(self, uuid):
        resp = self._request("GET", _rp(uuid), (200, 404))
        return resp.json() if resp.status_code == 200 else None

    def usages(self, uuid):
        resp = self._request("GET", _rp(uuid, "/usages"), (200, 404))
        return resp.json()["usages"] if resp.status_code == 200 else {}

    def has_allocations(self, uuid):
        resp = self._request("GET", _rp(uuid, "/allocations"), (200, 404))
        return resp.status_code == 200 and bool(resp.json()["allocations"])

    # -- writes ----------------------------------------------------------
    def create_provider(self, uuid, name):
        """Create; returns the generation.  Conflict if the uuid or name is taken."""
        resp = self._request("POST", "/resource_providers", (200,),
                             json={"uuid": uuid, "name": name})
        return resp.json()["generation"]

    def set_traits(self, uuid, generation, traits):
        self.ensure_traits(traits)
        resp = self._request("PUT", _rp(uuid, "/traits"), (200,),
                             json={"resource_provider_generation": generation,
                                   "traits": sorted(traits)})
        return resp.json()["resource_provider_generation"]

    def set_aggregates(self, uuid, generation, aggregates):
        resp = self._request("PUT", _rp(uuid, "/aggregates"), (200,),
                             json={"resource_provider_generation": generation,
                                   "aggregates": sorted(aggregates)})
        return resp.json()["resource_provider_generation"]

    def set_inventories(self, uuid, generation, inventories):
        for rc in inventories:
            self.ensure_resource_class(rc)
        resp = self._request("PUT", _rp(uuid, "/inventories"), (200,),
                             json={"resource_provider_generation": generation,
                                   "inventories": inventories})
        return resp.json()["resource_provider_generation"]

    def reshape_inventories(self, entries):
        """Set many providers' inventories in one request (POST /reshaper, 1.30).

        ``entries``: {uuid: (generation, inventories)}.  All or nothing: one
        stale generation refuses the whole request (Conflict), changing nothing.
        """
        for _, inventories in entries.values():
            for rc in inventories:
                self.ensure_resource_class(rc)
        self._request("POST", "/reshaper", (204,), microversion=RESHAPER_MICROVERSION, json={
            "inventories": {_rp(uuid).rsplit("/", 1)[1]: {
                "resource_provider_generation": generation, "inventories": inventories}
                for uuid, (generation, inventories) in entries.items()},
            "allocations": {}})

    def delete_provider(self, uuid):
        """Delete; False if it was already gone.  Conflict while allocations exist."""
        resp = self._request("DELETE", _rp(uuid), (204, 404))
        return resp.status_code == 204

    # -- one-time name creation (cached per process) ---------------------
    def ensure_resource_class(self, name):
        self._ensure_names([name], self._known_classes, "resource_classes")

    def ensure_traits(self, names):
        self._ensure_names(names, self._known_traits, "traits")

    def _existing(self, kind, names):
        """Which of these names Placement already has: one read, not a write each."""
        if kind == "traits":
            url = "/traits?name=in:" + ",".join(_quote(n) for n in names)
            return set(self._request("GET", url, (200,)).json()["traits"])
        return {rc["name"] for rc in
                self._request("GET", "/resource_classes", (200,)).json()["resource_classes"]}

    def _ensure_names(self, names, known, kind):
        """Create the custom names Placement lacks; standard ones always exist."""
        if known.issuperset(names):
            return
        with self._names_lock:
            missing = sorted(_checked(name) for name in set(names) - known)
            if not missing:
                return
            existing = self._existing(kind, missing)
            for name in missing:
                if name not in existing and name.startswith("CUSTOM_"):
                    self._request("PUT", f"/{kind}/{_quote(name)}", (201, 204))
                known.add(name)
