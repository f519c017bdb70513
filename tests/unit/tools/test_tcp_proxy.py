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

"""tests/functional/proxy.py's TcpProxy: what a partition does to a TCP client, on a
real socket (an echo server on loopback)."""

import socket
import threading

import pytest

from tests.functional.proxy import TcpProxy


@pytest.fixture
def echo():
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=lambda c=conn: [c.sendall(d) for d in iter(
                lambda: c.recv(100), b"")], daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def connect(proxy):
    client = socket.create_connection(("127.0.0.1", proxy.port))
    client.settimeout(0.5)
    return client


def test_a_cut_is_silence_both_ways_and_a_heal_closes_what_was_cut(echo):
    proxy = TcpProxy("127.0.0.1", echo)
    before = connect(proxy)
    before.sendall(b"hello")
    assert before.recv(10) == b"hello"
    proxy.cut = True
    during = connect(proxy)  # accepted: no refusal, as a partition looks
    for client in (before, during):
        client.sendall(b"lost")
        with pytest.raises(socket.timeout):
            client.recv(10)
    proxy.heal()
    assert before.recv(10) == b""  # closed: its client gives up and reconnects
    after = connect(proxy)
    after.sendall(b"again")
    assert after.recv(10) == b"again"
    proxy.close()
