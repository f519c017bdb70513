"""The test stack's HTTP session: a GET survives a server dropping the connection
unanswered, a write does not (it may have landed)."""

import pytest
import requests

from tests.unit.http_server import DROP
from tests.unit.http_server import serve
from tools import fleet


def test_a_get_is_tried_again_when_the_connection_drops():
    url, seen = serve([DROP, (b"{}", 2)])
    resp = fleet.session({}).get(url, timeout=5)
    assert resp.status_code == 200
    assert seen == [b"GET", b"GET"]


def test_a_write_is_not_tried_again():
    url, seen = serve([DROP, (b"{}", 2)])
    with pytest.raises(requests.ConnectionError):
        fleet.session({}).put(url, timeout=5)
    assert seen == [b"PUT"]
