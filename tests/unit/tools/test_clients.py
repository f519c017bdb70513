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

"""tools/clients/: the test clients' HTTP session.  A GET survives a server dropping
the connection unanswered, a write does not (it may have landed)."""

import pytest
import requests

from tests.unit.http_server import DROP
from tests.unit.http_server import serve
from tools import clients


def test_a_get_is_tried_again_when_the_connection_drops():
    url, seen = serve([DROP, (b"{}", 2)])
    resp = clients.session({}).get(url, timeout=5)
    assert resp.status_code == 200
    assert seen == [b"GET", b"GET"]


def test_a_write_is_not_tried_again():
    url, seen = serve([DROP, (b"{}", 2)])
    with pytest.raises(requests.ConnectionError):
        clients.session({}).put(url, timeout=5)
    assert seen == [b"PUT"]


def test_a_dropped_write_that_did_not_land_is_sent_once_more_and_counted():
    url, seen = serve([DROP, (b"{}", 2)])
    before = clients.REPEATS["POST repeated"]
    assert clients.call(clients.session({}), "POST", url, (200,), landed=lambda: False) == {}
    assert seen == [b"POST", b"POST"]
    assert clients.REPEATS["POST repeated"] == before + 1


def test_a_dropped_write_that_landed_is_not_sent_again():
    url, seen = serve([DROP, (b"{}", 2)])
    before = clients.REPEATS["POST had landed"]
    clients.call(clients.session({}), "POST", url, (200,), landed=lambda: True)
    assert seen == [b"POST"]
    assert clients.REPEATS["POST had landed"] == before + 1


def test_a_dropped_write_with_no_way_to_tell_is_not_sent_again():
    url, seen = serve([DROP, (b"{}", 2)])
    with pytest.raises(requests.ConnectionError):
        clients.call(clients.session({}), "POST", url, (200,))
    assert seen == [b"POST"]


def test_a_read_retried_after_a_drop_is_counted():
    url, _ = serve([DROP, (b"{}", 2)])
    before = clients.REPEATS["GET"]
    clients.session({}).get(url, timeout=5)
    assert clients.REPEATS["GET"] == before + 1
