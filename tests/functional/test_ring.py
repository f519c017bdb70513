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

"""Several agents share the fleet through a hash ring on a real coordination
backend (Redis, and tooz's file driver); any of them can die."""

import json
import signal
import time

import pytest

from tests.functional.agents import AgentProcess
from tests.functional.agents import traits
from tools.bench import common as bench_common
from tools.wait import wait_for

pytestmark = pytest.mark.functional
LEASE = 4


@pytest.fixture(params=["redis", "file"])
def backend(request, stack, tmp_path):
    if request.param == "redis":
        return stack.redis_url
    return f"file://{tmp_path}/coordination"


@pytest.fixture
def fleet_of(stack, shard, tmp_path, backend):
    started = []

    def start(count, reconcile=None, **extra):
        agents = []
        for i in range(count):
            agent = AgentProcess(stack, shard, tmp_path, f"agent-{i}",
                                 coordination={"backend_url": backend, "lease": LEASE,
                                               "heartbeat": 0.5},
                                 reconcile={"interval": 3600, **(reconcile or {})}, **extra)
            agents.append(agent.start())
        started.extend(agents)
        return agents
    yield start
    for agent in started:
        agent.stop(signal.SIGKILL)


def owned(agents):
    return [a.metric("rp_reporter_nodes_owned") for a in agents]


def wait_settled(agents, placement, nodes, total):
    """Every live agent has reconciled with the current ring, owns a share, and is idle."""
    def settled():
        live = [a for a in agents if a.proc.poll() is None]
        shares = owned(live)
        return (sum(shares) == total and all(shares)
                and all(a.metric("rp_reporter_last_reconcile_seconds") > 0
                        and a.metric("rp_reporter_queue_depth") == 0 for a in live))
    wait_for(settled, 60, f"{total} nodes owned and synced")


def ring_nodes(cli, conf):
    code, out, err = cli("ring", "show", "--nodes", "-f", "json", config_file=str(conf))
    assert code == 0, err
    return {row["node"]: row["owner"] for row in json.loads(out)}


FLEET = 90  # 30 a member: enough for every member's share; the ring's balance is unit-tested


@pytest.mark.every_release
def test_agents_split_the_fleet_and_survive_one_dying(fleet_of, ironic, placement, cli):
    nodes = bench_common.load_nodes(ironic, FLEET)
    agents = fleet_of(3)
    wait_settled(agents, placement, nodes, FLEET)
    # Every node owned by exactly one live agent, and synced.
    owners = ring_nodes(cli, agents[0].conf)
    assert set(owners) == set(nodes)
    assert set(owners.values()) == {"agent-0", "agent-1", "agent-2"}
    assert all(placement.provider(n) for n in nodes[::10])
    code, out, _ = cli("ring", "show", "-f", "json", config_file=str(agents[0].conf))
    rows = json.loads(out)
    assert {r["member"]: r["nodes"] for r in rows} == {
        f"agent-{i}": list(owners.values()).count(f"agent-{i}") for i in range(3)}
    assert all(r["liveness"] == "alive" for r in rows)

    # SIGKILL one: a change on one of its nodes reaches Placement within lease + 5 s.
    victim = agents[1]
    victim.stop(signal.SIGKILL)
    killed_at = time.monotonic()
    orphan = next(n for n, o in owners.items() if o == "agent-1")
    ironic.set_traits(orphan, ["CUSTOM_AFTER_KILL"])
    arrived = wait_for(lambda: "CUSTOM_AFTER_KILL" in traits(placement, orphan),
                       LEASE + 5, "change on the dead agent's node")
    print(f"takeover: {arrived - killed_at:.2f} s (lease {LEASE} s)")
    survivors = [agents[0], agents[2]]
    wait_settled(survivors, placement, nodes, FLEET)
    assert all(placement.provider(n) for n in nodes)  # no provider deleted

    # Restart it: it takes its share back without churn (in step: no writes).
    writes_before = sum(a.metric("rp_reporter_placement_writes_total", '{kind="inventories"}')
                        + a.metric("rp_reporter_placement_writes_total", '{kind="traits"}')
                        for a in survivors)
    victim.start()
    wait_settled(agents, placement, nodes, FLEET)
    assert victim.metric("rp_reporter_nodes_owned") == owned(agents)[1] > 0
    assert sum(victim.metric("rp_reporter_placement_writes_total", f'{{kind="{k}"}}')
               for k in ("create", "traits", "inventories")) == 0
    writes_after = sum(a.metric("rp_reporter_placement_writes_total", '{kind="inventories"}')
                       + a.metric("rp_reporter_placement_writes_total", '{kind="traits"}')
                       for a in survivors)
    assert writes_after == writes_before


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_losing_the_backend_fences_writes_until_it_returns(fleet_of, ironic, placement, stack):
    nodes = bench_common.load_nodes(ironic, 30)
    agents = fleet_of(2)
    wait_settled(agents, placement, nodes, 30)
    stack.stop(["redis"])
    stopped = time.monotonic()
    wait_for(lambda: all(not a.healthy() for a in agents), LEASE + 2, "agents fenced")
    fenced_after = time.monotonic() - stopped
    assert fenced_after <= LEASE + 1
    ironic.set_traits(nodes[0], ["CUSTOM_WHILE_FENCED"])
    time.sleep(2)  # notifications still arrive, but nobody may write
    assert "CUSTOM_WHILE_FENCED" not in placement.provider(nodes[0])["traits"]
    stack.start_service("redis")
    wait_for(lambda: "CUSTOM_WHILE_FENCED" in traits(placement, nodes[0]), 20,
             "the change made while fenced, after the backend returned")
    assert all(a.proc.poll() is None for a in agents)
    # Seen by every agent, though a renewal may block through the whole outage.
    wait_for(lambda: all("writes stopped" in a.output() and "writes resume" in a.output()
                         for a in agents), 20, "every agent fenced, then renewed")


@pytest.mark.every_release
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_a_stopped_agent_leaves_its_group_so_its_peer_takes_over_at_once(fleet_of, ironic,
                                                                         placement):
    nodes = bench_common.load_nodes(ironic, 20)
    leaving, staying = agents = fleet_of(2)  # sharing the listing: two receivers each
    wait_settled(agents, placement, nodes, 20)
    asked = time.monotonic()
    assert leaving.stop() == 0
    stopped = time.monotonic()
    # Its two message servers stop at once (one after the other: up to 15 s).
    assert stopped - asked < 8
    # Left, not dropped when its lease ran out (LEASE s after its last renewal).
    wait_for(lambda: staying.metric("rp_reporter_nodes_owned") == 20, LEASE, "takeover")
    assert time.monotonic() - stopped < LEASE / 2
    assert "not leaving group" not in leaving.output()
    assert "shut down in" in leaving.output()


@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_sigterm_while_the_backend_is_down_exits_quickly(fleet_of, stack):
    agent, = fleet_of(1)
    stack.stop(["redis"])
    try:
        wait_for(lambda: not agent.healthy(), LEASE + 2, "agent fenced")
        started = time.monotonic()
        assert agent.stop() == 0  # each call to Redis would block while its client retries
        assert time.monotonic() - started < 10
        assert "not leaving group" in agent.output()
    finally:
        stack.start_service("redis")


INTERVAL = 8


def listings(agent, source):
    return agent.metric("rp_reporter_reconcile_listings_total", f'{{source="{source}"}}')


def lister_and_members(agents):
    """(the agent that lists for the others, the others), once every other has run two
    passes on its slices."""
    def found():
        live = [a for a in agents if a.proc.poll() is None]
        senders = [a for a in live if listings(a, "sent") > 0]
        return len(senders) == 1 and all(listings(a, "shared") >= 2 for a in live
                                         if a is not senders[0])
    wait_for(found, 8 * INTERVAL, "one lister, every other member on its slices")
    live = [a for a in agents if a.proc.poll() is None]
    lister = next(a for a in live if listings(a, "sent") > 0)
    return lister, [a for a in live if a is not lister]


def repaired_in(placement, node, trait):
    """Seconds until a trait put on the node's provider behind the agents' back (drift
    no notification names) is gone again."""
    placement.add_trait(node, trait)
    added = time.monotonic()
    return wait_for(lambda: trait not in traits(placement, node), 4 * INTERVAL,
                    f"{trait} removed from {node}") - added


@pytest.mark.every_release
@pytest.mark.parametrize("backend", ["redis"], indirect=True)
def test_one_member_lists_for_the_ring_and_drift_is_still_repaired_in_an_interval(
        fleet_of, ironic, placement, cli):
    nodes = bench_common.load_nodes(ironic, 90)
    agents = fleet_of(3, reconcile={"interval": INTERVAL, "shared_listing_wait": 4})
    wait_settled(agents, placement, nodes, 90)
    lister, members = lister_and_members(agents)
    own_before = [listings(a, "own") for a in members]
    # Their start-up checks left the two full listings to the passes (a member makes
    # none): each agent's own pair slowed a large fleet's first shared listing.
    wait_for(lambda: all("check coordination" in a.output() for a in agents), 30,
             "the start-up checks logged")
    assert not any("check ironic listing" in a.output() for a in agents)

    # Drift on a member's node, which only a reconcile pass can see: repaired within an
    # interval (the lister's, jittered, and the member's pass on its slice).
    owners = ring_nodes(cli, agents[0].conf)
    node = next(n for n, owner in owners.items() if owner == members[0].conf.stem)
    took = repaired_in(placement, node, "CUSTOM_STRAY_1")
    print(f"drift repaired from a shared listing in {took:.2f} s (interval {INTERVAL} s)")
    assert took <= INTERVAL * 1.1 + 3
    # A node deleted from Ironic: its owner, a member, deletes its provider on the proof
    # of its slices (absent from two listings an interval apart), not before.
    gone = next(n for n, owner in owners.items() if owner == members[1].conf.stem)
    ironic.delete(gone)
    deleted_at = time.monotonic()
    wait_for(lambda: placement.provider(gone) is None, 5 * INTERVAL,
             "the deleted node's provider deleted")
    assert time.monotonic() - deleted_at >= INTERVAL * 0.9  # never on one listing
    assert "provider deleted" in members[1].output()
    # The members listed neither service meanwhile: their passes were on the slices.
    assert [listings(a, "own") for a in members] == own_before
    assert all(listings(a, "shared") >= 3 for a in members)
    nodes.remove(gone)

    # The lister dies: the ring's new lister lists for the survivors, and drift on a node
    # of the dead lister is repaired by its new owner.
    lister.stop(signal.SIGKILL)
    new_lister, survivors = lister_and_members(members)
    wait_settled(members, placement, nodes, len(nodes))
    owners = ring_nodes(cli, members[0].conf)
    node = next(n for n, owner in owners.items() if owner == survivors[0].conf.stem)
    took = repaired_in(placement, node, "CUSTOM_STRAY_2")
    print(f"after the lister's death, drift repaired in {took:.2f} s")
    assert took <= INTERVAL * 1.1 + 3
    assert all(placement.provider(n) for n in nodes)  # nothing deleted
