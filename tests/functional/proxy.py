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

"""A small HTTP proxy in front of a real service, for what the service cannot be
made to do on demand: answer as an older release (its version headers capped),
or fail some requests for a while.  Every request that reaches it is recorded with the
time it arrived, so a test can measure when a client wrote."""

import http.server
import sys
import threading
import time

import requests

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length",
              "content-encoding"}


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that went away (a service killed by a test) is no error of ours."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class Proxy:
    def __init__(self, upstream):
        self.upstream = upstream.rstrip("/")
        self.seen = []  # (time.monotonic(), method, path) of every request
        self.answer = None  # (method, path) -> (status, body) to answer instead, or None
        self.headers = {}  # response headers to set on every answer forwarded
        # The upstream's own address in what it answers (a version document's links)
        # made the proxy's, so a client that follows the links stays behind the proxy.
        self.links_to_self = False
        self._http = requests.Session()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _relay(self):
                proxy.seen.append((time.monotonic(), self.command, self.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                own = proxy.answer and proxy.answer(self.command, self.path)
                if own:
                    status, payload, headers = *own, {}
                else:
                    resp = proxy._http.request(
                        self.command, proxy.upstream + self.path, data=body,
                        headers={k: v for k, v in self.headers.items()
                                 if k.lower() not in HOP_BY_HOP | {"host"}},
                        allow_redirects=False, timeout=60)
                    status, payload = resp.status_code, resp.content
                    if proxy.links_to_self:
                        payload = payload.replace(proxy.upstream.encode(),
                                                  proxy.url.encode())
                    headers = {k: v for k, v in resp.headers.items()
                               if k.lower() not in HOP_BY_HOP}
                    headers.update(proxy.headers)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = do_HEAD = _relay

        self._server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def writes(self):
        return [(t, m, p) for t, m, p in self.seen if m not in ("GET", "HEAD")]

    def close(self):
        self._server.shutdown()
        self._server.server_close()
