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

"""The shared listing's bus under garbage, forgery, a broker outage and a
misconfigured ring: three agents on the real stack (Redis, RabbitMQ, Placement,
Ironic), messages cast at them from outside as anyone on the vhost could."""

import signal
import time
import uuid

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings

from rp_reporter import conf as rp_conf
from rp_reporter import ring as rp_ring
from rp_reporter import state as rp_state
from rp_reporter import wiring
from rp_reporter.agent import listing_bus
from rp_reporter.agent import rpc_bus
from rp_reporter.sync import listing_messages as lm
from rp_reporter.sync import shared_listing
from tests.functional.agents import AgentProcess
from tests.functional.agents import traits
from tests.functional.test_ring import lister_and_members
from tests.functional.test_ring import listings
from tools.bench import common as bench_common
from tools.wait import wait_for

pytestmark = pytest.mark.functional
INTERVAL = 8  # test_ring's, which lister_and_members waits by


def _names():
    """Three agent names whose ring has one lister from the second agent's start on:
    lister_and_members counts the agents that ever sent, and a lister that changes as
    the third joins would leave two."""
    for i in range(100):
        names = (f"bus-{i}", f"bus-{i + 1}", f"bus-{i + 2}")
        if (shared_listing.lister(rp_ring.Ring(names[:2]))
                == shared_listing.lister(rp_ring.Ring(names))):
            return names
    raise AssertionError("no three names keep their lister")


NAMES = _names()


@pytest.fixture
def three(stack, shard, tmp_path):
    started = []

    def start(names=NAMES, **ring):
        for name in names:
            agent = AgentProcess(stack, shard, tmp_path, name,
                                 coordination={"backend_url": stack.redis_url, "lease": 4,
                                               "heartbeat": 0.5, "group": f"bus-{shard}"},
                                 reconcile={"interval": INTERVAL, "shared_listing_wait": 4},
                                 ring=ring.get(name, {}))
            started.append(agent.start())
        return started
    yield start
    for agent in started:
        agent.stop(signal.SIGKILL)


def dropped(agent):
    return sum(agent.metric("rp_reporter_listing_messages_dropped_total", f'{{kind="{k}"}}')
               for k in ("page", "end"))


def outsider(agent):
    """A client on the agents' vhost and topic, as any service there could make one."""
    return rpc_bus.RpcBus(rp_conf.load(["--config-file", str(agent.conf)]))


def ring_context(member):
    """The context of the ring of all three, as its lister would send it to ``member``."""
    conf = rp_conf.load(["--config-file", str(member.conf)])
    shared = listing_bus.Sharing(conf, None, lambda: (), bus=object(),
                                 deployment=rp_state.identity_hash(wiring.identity(conf)))
    return shared.context(rp_ring.Ring(NAMES)).as_dict()


@pytest.mark.every_release
def test_forged_slices_and_garbage_neither_stop_nor_move_a_member(three, ironic, placement):
    """One ring for both: a forged slice (signed with another key, or not at all) naming a
    node Ironic lacks, then random, truncated, oversized and wrong-typed payloads on both
    endpoints.  The member drops and counts each, stays a healthy member, creates no
    provider, and keeps using the lister's real slices."""
    nodes = bench_common.load_nodes(ironic, 30)
    agents = three()
    wait_for(lambda: all(placement.provider(n) for n in nodes), 60, "nodes reported")
    lister, members = lister_and_members(agents)
    target = members[0]
    ghost = str(uuid.uuid4())  # Ironic has no such node
    context = ring_context(target)
    bus = outsider(target)
    shared_before = listings(target, "shared")
    for keys in (["not-the-groups-key"], None):
        # Claimed as the real lister's, a listing newer than any of its own.
        listing_id = (time.time() + 3, lister.conf.stem, 10 ** 9)
        records = [{"uuid": ghost, "resource_class": "baremetal-gold", "traits": [],
                    "maintenance": False, "provision_state": "available",
                    "power_state": "power on", "instance_uuid": None}]
        messages = [lm.page_message(listing_id, context, 0, records, {ghost: ("ghost", 0)}),
                    lm.end_message(listing_id, context, 1, None, 0.5)]
        for message in messages:
            sent = lm.sign(message, keys) if keys else message
            bus.cast(target.conf.stem, f"listing_{message['kind']}", message=sent)
    forged = 4
    wait_for(lambda: dropped(target) >= forged, 10, "the forged messages dropped")
    logged = [line for line in target.output().splitlines()
              if "shared listing: a " in line and "dropped" in line]
    assert len(logged) == 2, logged  # once per (sender, kind)

    sent = [forged]
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
        | st.text(max_size=30),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8),
                                                                      inner, max_size=4),
        max_leaves=20)
    near_misses = st.builds(
        lambda over: {**lm.page_message((time.time(), lister.conf.stem, 1), context, 0,
                                        [{"uuid": ghost}]), **over},
        st.dictionaries(st.sampled_from(["v", "kind", "listing_id", "context", "seq",
                                         "records", "providers", "mac"]),
                        json_values, max_size=3))
    oversized = st.just({"records": [{"uuid": ghost, "blob": "x" * 1000}] * 500})

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(method=st.sampled_from(["listing_page", "listing_end"]),
           payload=st.one_of(json_values, near_misses, oversized),
           as_message=st.booleans())
    def cast(method, payload, as_message):
        bus.cast(target.conf.stem, method, **({"message": payload} if as_message
                                              else {"records": payload}))
        sent[0] += 1
    cast()
    bus.cast(target.conf.stem, "no_such_method", message={})  # oslo.messaging's to refuse
    wait_for(lambda: dropped(target) >= sent[0], 30, f"all {sent[0]} casts dropped")
    assert dropped(target) == sent[0]
    # Two more passes: the member went on with the lister's real slices.
    wait_for(lambda: listings(target, "shared") >= shared_before + 2, 4 * INTERVAL,
             "two more passes on the lister's slices")
    assert placement.provider(ghost) is None
    assert target.proc.poll() is None and target.healthy()
    # Still a member that syncs: a change on one of its nodes reaches Placement.
    mine = next(n for n in nodes if rp_ring.Ring(NAMES).owner(n) == target.conf.stem)
    ironic.set_traits(mine, ["CUSTOM_AFTER_GARBAGE"])
    wait_for(lambda: "CUSTOM_AFTER_GARBAGE" in traits(placement, mine), 10,
             "a change after the garbage")


def test_a_broker_outage_ends_no_pass_and_every_agent_converges(three, ironic, placement,
                                                                 stack):
    nodes = bench_common.load_nodes(ironic, 30)
    agents = three()
    wait_for(lambda: all(placement.provider(n) for n in nodes), 60, "nodes reported")
    lister, members = lister_and_members(agents)
    passes = lister.metric("rp_reporter_reconcile_passes_total")
    stack.stop(["rabbitmq"])
    try:
        ironic.set_traits(nodes[0], ["CUSTOM_DURING_OUTAGE"])  # no notification will come
        wait_for(lambda: lister.metric("rp_reporter_reconcile_passes_total") >= passes + 2,
                 3 * INTERVAL, "two lister passes completed while the broker is down")
        wait_for(lambda: lister.health()[0] == 503, INTERVAL, "the lister's /healthz says so")
        assert "shared listing's casts" in lister.health()[1]
        started = time.monotonic()
        assert members[1].stop() == 0  # SIGTERM with the broker down
        assert time.monotonic() - started < 15
    finally:
        stack.start_service("rabbitmq")
    # Every agent converges: the change made during the outage reaches Placement.
    wait_for(lambda: "CUSTOM_DURING_OUTAGE" in traits(placement, nodes[0]), 4 * INTERVAL,
             "the change made while the broker was down")
    wait_for(lambda: lister.healthy() and members[0].healthy(), 4 * INTERVAL,
             "both agents healthy again")


def test_a_slice_cut_with_other_ring_partitions_is_refused_naming_the_option(
        three, ironic, placement):
    nodes = bench_common.load_nodes(ironic, 12)
    members = tuple(sorted(NAMES[:2]))
    lister = shared_listing.lister(rp_ring.Ring(members))
    # The other agent's partitions differ, chosen so both rings name the same lister.
    partitions = next(p for p in (512, 256, 128, 2048, 64)
                      if shared_listing.lister(rp_ring.Ring(members, partitions=p)) == lister)
    other = next(m for m in members if m != lister)
    # Each agent syncs the nodes its own ring gives it.  A node both rings give the other
    # is nobody's (the misconfiguration the refusal names): it is reported only when the
    # first agent's pass, alone in the group, ends before the second joins.
    rings = {lister: rp_ring.Ring(members), other: rp_ring.Ring(members, partitions=partitions)}
    owned = [n for n in nodes if any(ring.owner(n) == name for name, ring in rings.items())]
    agents = three(names=members, **{other: {"partitions": partitions}})
    wait_for(lambda: all(placement.provider(n) for n in owned), 60, "owned nodes reported")
    member = next(a for a in agents if a.conf.stem == other)
    wait_for(lambda: "partitions" in member.output(), 4 * INTERVAL,
             "the member's refusal naming the option")
    assert listings(member, "shared") == 0
    line = next(line for line in member.output().splitlines() if "partitions" in line)
    assert "listing by myself" in line and f"{partitions}" in line
