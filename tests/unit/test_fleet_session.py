"""The test stack's HTTP session: a GET survives a server dropping the connection
unanswered, a write does not (it may have landed)."""

import socket
import threading

import pytest
import requests

from tools import fleet


def drop_first_connection_server():
    """A server that closes its first connection without an answer, then answers 200."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen = []

    def serve():
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                request = conn.recv(65536)
                seen.append(request.split(b" ", 1)[0])
                if len(seen) > 1:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                 b"Connection: close\r\n\r\n{}")
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", seen


def test_a_get_is_tried_again_when_the_connection_drops():
    url, seen = drop_first_connection_server()
    resp = fleet.session({}).get(url, timeout=5)
    assert resp.status_code == 200
    assert seen == [b"GET", b"GET"]


def test_a_write_is_not_tried_again():
    url, seen = drop_first_connection_server()
    with pytest.raises(requests.ConnectionError):
        fleet.session({}).put(url, timeout=5)
    assert seen == [b"PUT"]
