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

"""What the clients share: their requests session, the one place that decides
whether a request is sent again, the count of what was, and a Keystone token."""

import collections
import contextlib
import datetime
import threading
import time

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

# Every request these helpers repeated after a dropped connection, by kind ("GET" for
# urllib3's retries of reads, "<METHOD> repeated" or "<METHOD> had landed" for writes):
# a run that expects a quiet stack reads it, and a test asserts on it.
REPEATS = collections.Counter()


class KeystoneToken(requests.auth.AuthBase):
    """Sends a Keystone token (password authentication, in ``scope``: {"system": {"all":
    True}} or {"project": {...}}) as X-Auth-Token, and fetches a new one shortly before
    it expires, or once when a request is answered 401.  The one place that gives the
    clients' requests a token on the keystone profile (on noauth they send fixed headers)."""

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


# Answers that say the request was not carried out and may simply be sent again.
RETRIED = ("database is locked", "The Keystone service is temporarily unavailable")


def repeatable():
    """The ``landed`` of a write that is the same state however often it is sent (a
    PUT of a whole value): it is always sent again."""
    return False


def call(http, method, url, expect, landed=None, slots=None, **kw):
    """``respond``'s answer, decoded (None for none)."""
    resp = respond(http, method, url, expect, landed, slots, **kw)
    return resp.json() if resp is not None and resp.content else None


def respond(http, method, url, expect, landed=None, slots=None, **kw):
    """One request, its response (None for a write that had landed, below); a sqlite
    "database is locked" 500 (concurrent writers on the local stack's sqlite) is tried
    again a few times, as is keystonemiddleware's 503 for a Keystone too busy to
    validate the token (the request never reached the service).

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
        if resp.status_code in expect or not any(busy in resp.text for busy in RETRIED):
            break
        time.sleep(min(0.05 * (attempt + 1), 0.5))
    assert resp.status_code in expect, f"{method} {url}: {resp.status_code} {resp.text}"
    return resp
