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
or fail some requests for a while.  Every request that reaches it is recorded with
the time it arrived, so a test can measure when a client wrote.  And a TCP relay
that a test can cut, as a partition does."""

import contextlib
import http.server
import socket
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


class TcpProxy:
    """A TCP relay in front of a real service whose protocol is not HTTP (RabbitMQ's
    AMQP, Redis), which a test can cut as a partition cuts it: while ``cut``, nothing
    flows either way on any connection and a new one is accepted and never answered
    (the client sees silence, not a refusal: its heartbeats and calls time out); healed,
    the connections cut meanwhile are closed (their client gave up on them) and new
    ones flow."""

    def __init__(self, host, port):
        self.upstream = (host, port)
        self.cut = False
        self._pairs = set()  # (client, upstream) sockets relayed
        self._held = []  # clients accepted while cut
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            if self.cut:
                self._held.append(client)
                continue
            try:
                pair = (client, socket.create_connection(self.upstream))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.add(pair)
            for source, sink in (pair, pair[::-1]):
                threading.Thread(target=self._pump, args=(source, sink, pair),
                                 daemon=True).start()

    def _pump(self, source, sink, pair):
        try:
            while pair in self._pairs:
                data = source.recv(65536)
                if not data:
                    break
                while self.cut and pair in self._pairs:
                    time.sleep(0.05)  # what arrives while cut never gets through
                if pair in self._pairs:
                    sink.sendall(data)
        except OSError:
            pass
        self._drop(pair)

    def _drop(self, pair):
        with self._lock:
            self._pairs.discard(pair)
        for end in pair:
            with contextlib.suppress(OSError):
                end.close()

    def heal(self):
        """Flow again: what was cut is closed, new connections are relayed."""
        with self._lock:
            cut, self._pairs = list(self._pairs), set()
        held, self._held = self._held, []
        self.cut = False
        for pair in cut:
            self._drop(pair)
        for client in held:
            with contextlib.suppress(OSError):
                client.close()

    def close(self):
        self.heal()
        self._listener.close()
