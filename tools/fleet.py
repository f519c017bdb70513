"""Helpers for tests, demo and benchmarks: drive the real Ironic and Placement over HTTP.

They play the operator, nova and foreign writers; the code under test never
uses them.
"""

import collections
import concurrent.futures
import contextlib
import datetime
import threading
import time
import urllib.error
import urllib.request
import uuid

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

IRONIC_VERSION = {"X-OpenStack-Ironic-API-Version": "1.95"}
# A connection per request: Ironic's API server closes a kept-alive connection after
# 10 s idle, and a reuse racing that close fails (a loopback connect costs next to nothing).
IRONIC_HEADERS = {**IRONIC_VERSION, "Connection": "close"}
# Ironic 39 serves its API with cheroot's defaults, which ironic.conf cannot change: 10
# worker threads and a listen backlog of 5.  More connections arriving at once than it
# accepts overflow the kernel's accept queue (TcpExtListenOverflows), and some of them
# are reset ("Connection reset by peer"): 5 of 96 node creations at 24 at once, 17 at 48,
# none at 8 or fewer.  Ironic is the bottleneck either way (96 creations took 5.7 s at
# 4 at once and 5.1 s at 24), so every helper of a process shares these few slots,
# whichever test, topology or thread it serves.
IRONIC_SLOTS = threading.BoundedSemaphore(4)
# Every request these helpers repeated after a dropped connection, by kind ("GET" for
# urllib3's retries of reads, "<METHOD> repeated" or "<METHOD> had landed" for writes):
# a run that expects a quiet stack reads it, and a test asserts on it.
REPEATS = collections.Counter()
PLACEMENT = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


def health(port, timeout=1):
    """(status, body) of an agent's /healthz, or (None, "") while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return None, ""


def metrics(port):
    """An agent's Prometheus samples: {"name{labels}": value}; {} when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


class KeystoneToken(requests.auth.AuthBase):
    """Sends a Keystone token (password authentication, in ``scope``: {"system": {"all":
    True}} or {"project": {...}}) as X-Auth-Token, and fetches a new one shortly before
    it expires, or once when a request is answered 401.  The one place that gives
    fleet's requests a token on the keystone profile (on noauth they send fixed headers)."""

    def __init__(self, auth_url, username, password, scope, margin=20):
        self.auth_url, self.scope, self.margin = auth_url, scope, margin
        self.user = {"name": username, "password": password, "domain": {"name": "Default"}}
        self._token, self._expires, self._lock = None, 0.0, threading.Lock()

    def token(self, renew=False):
        with self._lock:
            if renew or self._token is None or time.time() > self._expires - self.margin:
                resp = requests.post(self.auth_url + "/auth/tokens", timeout=30, json={
                    "auth": {"identity": {"methods": ["password"],
                                          "password": {"user": self.user}},
                             "scope": self.scope}})
                assert resp.status_code == 201, f"token: {resp.status_code} {resp.text}"
                expires = resp.json()["token"]["expires_at"].replace("Z", "+00:00")
                self._token = resp.headers["X-Subject-Token"]
                self._expires = datetime.datetime.fromisoformat(expires).timestamp()
            return self._token

    def __call__(self, request):
        request.headers["X-Auth-Token"] = self.token()
        request.register_hook("response", self._renew_on_401)
        return request

    def _renew_on_401(self, resp, **kwargs):
        if resp.status_code != 401 or resp.request.headers.get("X-Auth-Token") != self._token:
            return resp
        # Our current token was refused (revoked, or expired early): once more with a new one.
        retry = resp.request.copy()
        retry.headers["X-Auth-Token"] = self.token(renew=True)
        retry.hooks["response"] = []
        resp.content  # noqa: B018  (read it, so the connection can be reused)
        resp.close()
        again = resp.connection.send(retry, **kwargs)
        again.history.append(resp)
        return again


class CountedRetry(Retry):
    """urllib3's retry of a read, counted in REPEATS."""

    def increment(self, method=None, *args, **kwargs):
        REPEATS[method or "GET"] += 1
        return super().increment(method, *args, **kwargs)


def session(headers, auth=None):
    """A requests session for the local stack.  A GET is tried again when the server
    closed a kept-alive connection just as it was reused (gunicorn drops idle ones after
    2 s; a reuse racing that close failed a CI run with RemoteDisconnected); writes
    are not here, since they may have landed (``call`` decides that).  ``auth``: a
    KeystoneToken on the keystone profile (it replaces the noauth X-Auth-Token), None
    on noauth."""
    http = requests.Session()
    http.headers.update(headers)
    http.auth = auth
    retry = CountedRetry(total=3, connect=3, read=3, status=0, backoff_factor=0.1,
                         allowed_methods={"GET"}, raise_on_status=False)
    http.mount("http://", HTTPAdapter(max_retries=retry))
    return http


def repeatable():
    """The ``landed`` of a write that is the same state however often it is sent (a
    PUT of a whole value): it is always sent again."""
    return False


def call(http, method, url, expect, landed=None, slots=None, **kw):
    """One request; a sqlite "database is locked" 500 (concurrent writers on the
    local stack's sqlite) is tried again a few times.

    A write whose connection broke before any answer may or may not have landed: it is
    sent once more only when ``landed()`` (a fresh read of what it writes) says it did
    not; without ``landed`` the error is raised.  Every repeat is counted in REPEATS.
    ``slots``: a semaphore the request holds while it is in flight."""
    for attempt in range(25):
        try:
            with slots or contextlib.nullcontext():
                resp = http.request(method, url, timeout=30, **kw)
        except requests.ConnectionError:
            if method == "GET" or landed is None or attempt:
                raise
            if landed():
                REPEATS[f"{method} had landed"] += 1
                return None
            REPEATS[f"{method} repeated"] += 1
            continue
        if resp.status_code in expect or "database is locked" not in resp.text:
            break
        time.sleep(min(0.05 * (attempt + 1), 0.5))
    assert resp.status_code in expect, f"{method} {url}: {resp.status_code} {resp.text}"
    return resp.json() if resp.content else None


class Ironic:
    """Each write names how a fresh read shows that it landed (``call``), so one that
    met a dropped connection is sent again only when it did not."""

    def __init__(self, url, shard, auth=None):
        self.url, self.shard = url, shard
        self.http = session(IRONIC_HEADERS, auth)
        self.deleted = []  # nodes deleted through this helper

    def _call(self, method, path, expect=(200, 201, 202, 204), landed=None, **kw):
        return call(self.http, method, self.url + path, expect, landed=landed,
                    slots=IRONIC_SLOTS, **kw)

    def get(self, node):
        return self._call("GET", f"/v1/nodes/{node}")

    def find(self, node):
        """The node, or None when Ironic has no such node."""
        found = self._call("GET", f"/v1/nodes/{node}", expect=(200, 404))
        return None if found is None or "error_message" in found else found

    def wait_state(self, node, state, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n = self.get(node)
            if n["provision_state"] == state and not n["target_provision_state"]:
                return n
            time.sleep(0.05)
        raise AssertionError(f"{node} stuck in {n['provision_state']}: {n['last_error']}")

    def provision(self, node, target, state):
        def landed():  # reached, or on its way
            found = self.get(node)
            return found["provision_state"] == state or bool(found["target_provision_state"])
        self._call("PUT", f"/v1/nodes/{node}/states/provision", json={"target": target},
                   landed=landed)
        return self.wait_state(node, state)

    def create(self, resource_class="baremetal-gold", state="available", traits=(),
               maintenance=False, instance=False, power="power on"):
        """A node in the given state (enroll, manageable, available, active)."""
        node = self.enroll(resource_class, traits)
        if state != "enroll":
            self.provision(node, "manage", "manageable")
        if state in ("available", "active"):
            self.provision(node, "provide", "available")
        if power and state != "enroll":
            self.set_power(node, power)
        if instance or state == "active":
            self.patch(node, instance_uuid=str(uuid.uuid4()))
        if state == "active":
            self.provision(node, "active", "active")
        if maintenance:
            self.set_maintenance(node, True)
        return node

    def enroll(self, resource_class="baremetal-gold", traits=()):
        """A new node in enroll state, of this shard; its uuid."""
        node = str(uuid.uuid4())  # ours, so a repeat can look for it
        body = {"uuid": node, "driver": "fake-hardware", "shard": self.shard}
        if resource_class is not None:
            body["resource_class"] = resource_class
        self._call("POST", "/v1/nodes", json=body, landed=lambda: self.find(node) is not None)
        if traits:
            self.set_traits(node, traits)
        return node

    def create_many(self, count, **kw):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda _: self.create(**kw), range(count)))

    def set_power(self, node, target):
        def landed():
            found = self.get(node)
            return found["power_state"] == target or bool(found["target_power_state"])
        self._call("PUT", f"/v1/nodes/{node}/states/power", json={"target": target},
                   landed=landed)
        deadline = time.monotonic() + 10
        while self.get(node)["power_state"] != target and time.monotonic() < deadline:
            time.sleep(0.05)

    def patch(self, node, **fields):
        ops = [{"op": "add" if v is not None else "remove", "path": f"/{k}",
                **({"value": v} if v is not None else {})} for k, v in fields.items()]
        def landed():
            found = self.get(node)
            return all(found.get(k) == v for k, v in fields.items())
        return self._call("PATCH", f"/v1/nodes/{node}", json=ops, landed=landed)

    def set_maintenance(self, node, on):
        if on:
            self._call("PUT", f"/v1/nodes/{node}/maintenance", json={"reason": "test"},
                       landed=repeatable)
        else:
            self._call("DELETE", f"/v1/nodes/{node}/maintenance",
                       landed=lambda: not self.get(node)["maintenance"])

    def set_traits(self, node, traits):
        self._call("PUT", f"/v1/nodes/{node}/traits", json={"traits": list(traits)},
                   landed=repeatable)

    def delete(self, node):
        self._call("DELETE", f"/v1/nodes/{node}", landed=lambda: self.find(node) is None)
        self.deleted.append(node)  # its provider is the test's to clean up (remove_providers)


class Placement:
    def __init__(self, url, auth=None):
        self.url = url
        self.http = session(PLACEMENT, auth)

    def _call(self, method, path, expect=(200, 201, 204), **kw):
        return call(self.http, method, self.url + path, expect, **kw)

    def provider(self, rp):
        """(name, generation, inventories, traits), or None when there is no provider
        (also when it vanishes between these reads)."""
        reads = [self.http.get(f"{self.url}/resource_providers/{rp}{part}", timeout=30)
                 for part in ("", "/inventories", "/traits")]
        if any(r.status_code == 404 for r in reads):
            return None
        for r in reads:
            assert r.status_code == 200, f"{r.url}: {r.status_code} {r.text}"
        provider, inv, traits = (r.json() for r in reads)
        return {"name": provider["name"], "generation": inv["resource_provider_generation"],
                "inventories": {rc: (i["total"], i["reserved"], i["max_unit"])
                                for rc, i in inv["inventories"].items()},
                "traits": set(traits["traits"])}

    def provider_inventories(self, rp):
        """One read: the inventories, or None (for tight polling)."""
        resp = self.http.get(f"{self.url}/resource_providers/{rp}/inventories", timeout=30)
        return resp.json()["inventories"] if resp.status_code == 200 else None

    def provider_trait_names(self, rp):
        """One read: the traits, or an empty set (for tight polling)."""
        resp = self.http.get(f"{self.url}/resource_providers/{rp}/traits", timeout=30)
        return set(resp.json()["traits"]) if resp.status_code == 200 else set()

    def offered(self, resource_class):
        """The providers nova 34's scheduler is offered for one unit of ``resource_class``
        (its allocation candidates, with the root traits nova asks for on every request)."""
        found = self._call("GET", f"/allocation_candidates?resources={resource_class}:1"
                                  "&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED")
        return set(found["provider_summaries"])

    def allocate(self, rp, resource_class):
        consumer = str(uuid.uuid4())
        self._call("PUT", f"/allocations/{consumer}", json={
            "allocations": {rp: {"resources": {resource_class: 1}}},
            "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        return consumer

    def deallocate(self, consumer):
        self._call("DELETE", f"/allocations/{consumer}")

    def allocations(self, consumer):
        """{provider: {class: amount}} of one consumer ({} when it has none)."""
        held = self._call("GET", f"/allocations/{consumer}")["allocations"]
        return {rp: dict(a["resources"]) for rp, a in held.items()}

    def remove_providers(self, rps):
        """Delete these providers and whatever is allocated against them (test clean-up:
        a provider left for a deleted node would count against the next test's reporter
        as a node gone from Ironic)."""
        for rp in rps:
            resp = self.http.get(f"{self.url}/resource_providers/{rp}/allocations", timeout=30)
            for consumer in resp.json()["allocations"] if resp.status_code == 200 else ():
                self._call("DELETE", f"/allocations/{consumer}", expect=(204, 404))
            self._call("DELETE", f"/resource_providers/{rp}", expect=(204, 404))

    def add_trait(self, rp, trait):
        """A foreign writer: adds a trait of its own, generation-guarded like anyone,
        re-reading and retrying when someone else wrote first."""
        self._call("PUT", f"/traits/{trait}")
        for _ in range(20):
            current = self._call("GET", f"/resource_providers/{rp}/traits")
            resp = self.http.put(f"{self.url}/resource_providers/{rp}/traits", timeout=30, json={
                "resource_provider_generation": current["resource_provider_generation"],
                "traits": current["traits"] + [trait]})
            if resp.status_code != 409:
                assert resp.status_code == 200, f"add_trait: {resp.status_code} {resp.text}"
                return
        raise AssertionError(f"add_trait {trait} on {rp}: conflicts 20 times in a row")
