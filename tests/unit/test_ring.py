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

import random
import uuid

import pytest

from rp_reporter import membership
from rp_reporter import ring

random.seed(42)
NODES = [str(uuid.UUID(int=random.getrandbits(128))) for _ in range(3000)]
AGENTS = [f"agent-{i}" for i in range(5)]


def test_every_node_has_exactly_one_owner_among_the_members():
    r = ring.Ring(AGENTS[:3])
    loads = r.loads(NODES)
    assert set(loads) == set(AGENTS[:3])
    assert sum(loads.values()) == len(NODES)
    assert all(r.owner(n) in AGENTS[:3] for n in NODES[:100])


def test_owner_depends_on_members_not_their_order():
    a, b = ring.Ring(AGENTS[:3]), ring.Ring(list(reversed(AGENTS[:3])))
    assert all(a.owner(n) == b.owner(n) for n in NODES)


def test_adding_a_member_moves_nodes_only_to_it():
    before, after = ring.Ring(AGENTS[:3]), ring.Ring(AGENTS[:4])
    moved = [n for n in NODES if before.owner(n) != after.owner(n)]
    assert moved and all(after.owner(n) == "agent-3" for n in moved)
    assert ring.movement(before, after, NODES) == len(moved) / len(NODES)


def test_removing_a_member_moves_only_its_nodes():
    before, after = ring.Ring(AGENTS[:4]), ring.Ring(AGENTS[:3])
    assert all(before.owner(n) == "agent-3" for n in NODES if before.owner(n) != after.owner(n))


def test_balance_is_near_even():
    # A sanity bound with margin; the benchmark prints the measured figures.
    assert 1.0 <= ring.balance(ring.Ring(AGENTS[:3]), NODES) < 1.15


def test_hash_algorithm_is_an_option():
    sha = ring.Ring(AGENTS[:3], hash_function="sha256")
    sha512 = ring.Ring(AGENTS[:3], hash_function="sha512")
    assert any(sha.owner(n) != sha512.owner(n) for n in NODES[:50])
    with pytest.raises(ValueError):
        ring.Ring(AGENTS[:3], hash_function="no-such-hash")


def test_an_empty_ring_is_refused():
    with pytest.raises(ValueError):
        ring.Ring([])


def test_alone_and_static_peers():
    alone = membership.Alone("me")
    assert alone.tick() == {"me"} and not alone.fenced
    peers = membership.StaticPeers("me", ["a", "b"])
    assert peers.tick() == {"me", "a", "b"} and not peers.fenced


@pytest.mark.parametrize("url, expected", [
    ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379?timeout=10"),
    ("redis://h:1?timeout=3", "redis://h:1?timeout=3"),
    ("file:///var/lib/rp", "file:///var/lib/rp?timeout=10"),
])
def test_backend_url_gets_the_lease_as_timeout(url, expected):
    assert membership.with_timeout(url, 10) == expected


def test_passwords_never_reach_a_log_line():
    assert "s3cret" not in membership._safe("redis://:s3cret@h:6379?timeout=10")
    assert "s3cret" not in membership._safe("redis://user:s3cret@h:6379")

