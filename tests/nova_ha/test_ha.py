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

"""nova-compute HA for Ironic (issue items 1-5): kill one of three compute services
(SIGKILL, no goodbye) and nothing stops working, no one moves anything by hand.

One script, run on nova's own driver first (the reference: nova's ring moves free
nodes; nodes with instances stay with the dead service) and then on rp_reporter's
driver with ``peers_from = coordination``; each story runs once and the tests read
what it saw.  Timings are wall-clock on this machine, with the settings of
conftest.py (lease, nova's resource-tracker interval and service_down_time).
"""

import datetime
import functools
import json
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

from rp_reporter import ring as rp_ring
from rp_reporter.nova_compute import hooks
from rp_reporter.nova_compute import rehome
from tests.functional.agents import operator_cli
from tests.functional.proxy import Proxy
from tests.nova_ha import conftest as ha
from tools import clients
from tools.localstack import etcd
from tools.localstack import nova
from tools.localstack import process
from tools.localstack import redis
from tools.localstack.probes.sitecustomize import UPCALL
from tools.wait import NotSeen
from tools.wait import wait_for
from tools.wait import wait_until

SLACK = 5  # seconds of a 2-core machine running a whole cloud
REHOME_PAUSE = 15  # s between a re-homing's two steps, in the mover scenario only
# s a mover waits between deciding a fence and writing it, in the rejoin story: longer
# than the fenced service's restart and rejoin (15 s was not: it rejoined after the fence)
REJOIN_PAUSE = 45
# When a dead service is fenced twice over, at the latest: its lease ran out (its last
# renewal came before the kill) and nova's servicegroup reports it down (its last
# report came at most report_interval before the kill).
FENCED_AFTER_KILL = max(ha.LEASE, ha.SERVICE_DOWN)


def place_servers(cloud, made, tag):
    """One server forced onto each service that manages a node (the ring may leave one
    with none); the victim: the service with the most nodes (three at least of nine),
    one of its free nodes put into maintenance (nova bug 1839560's scenario).  Returns
    (victim, {server: node}, maintenance node)."""
    homes = {node: hosts[0] for node, hosts in cloud.homes(made.nodes).items()}
    victim = max(made.hosts, key=lambda h: sum(home == h for home in homes.values()))
    servers = {}
    for host in sorted(set(homes.values())):
        server = cloud.nova.boot(f"ha-{tag}-{host}", made.flavor, host=host)
        built = cloud.nova.wait_built(server)
        assert built["status"] == "ACTIVE", built
        servers[server] = built["OS-EXT-SRV-ATTR:hypervisor_hostname"]
    free = sorted(n for n, h in homes.items() if h == victim and n not in servers.values())
    assert len(free) >= 2, f"{victim} needs two free nodes, the ring gave it {homes}"
    made.ironic.set_maintenance(free[0], True)
    return victim, servers, free[0]


def kill_and_watch(cloud, made, victim, servers, in_maintenance, rehomes):
    """Kill ``victim``; what happens to its free nodes, its servers, and on its return."""
    facts = {}
    homes = {node: hosts[0] for node, hosts in cloud.homes(made.nodes).items()}
    survivors = [h for h in made.hosts if h != victim]
    victim_servers = [s for s, n in servers.items() if homes[n] == victim]
    victim_free = [n for n, h in homes.items()
                   if h == victim and n not in servers.values() and n != in_maintenance]
    assert victim_free, f"{victim}'s free nodes moved before the kill: {homes}"
    last_report = ha.report_time(cloud.nova.compute_service(victim))
    killed_at = made.kill(cloud.stack, victim)

    # 1. Its free nodes: a live compute node record and offered to the scheduler.
    def free_schedulable():
        found = cloud.homes(victim_free)
        return (all(found[n] and found[n][0] in survivors for n in victim_free)
                and set(victim_free) <= cloud.offered(made))
    wait_for(free_schedulable, FENCED_AFTER_KILL + 3 * ha.PERIODIC + 60,
             f"{made.name}: the dead service's free nodes schedulable elsewhere")
    facts["kill_to_free_schedulable_s"] = round(time.time() - killed_at, 1)
    node = victim_free[0]
    server = cloud.nova.boot(f"ha-{made.name}-onfree", made.flavor,
                             host=cloud.home(node), node=node)
    facts["booted_on_free"] = cloud.nova.wait_built(server)["status"]
    servers[server] = node

    # 2. Its servers re-homed once it is fenced (or, with nova's driver, never).
    fenced_at = max(killed_at + ha.LEASE, last_report + ha.SERVICE_DOWN)
    facts["fenced_at"] = fenced_at

    def rehomed():
        found = cloud.homes([servers[s] for s in victim_servers])
        return all(cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] in survivors
                   and found[servers[s]] == [cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"]]
                   for s in victim_servers)
    # nova's driver never re-homes: it is given the bound ours is held to, and a margin.
    bound = 3 * ha.PERIODIC + 30 if rehomes else 2 * ha.PERIODIC + SLACK
    try:
        wait_for(rehomed, max(fenced_at - time.time(), 0) + bound,
                 f"{made.name}: the dead service's servers re-homed")
        facts["fence_to_rehomed_s"] = round(time.time() - fenced_at, 1)
        # Never before nova saw it down (its last report, to the second, and
        # service_down_time): the first move's own log line.
        facts["rehomed_after_fence_logged_s"] = round(ha.first_rehoming(
            made, survivors, victim_servers) - (last_report + ha.SERVICE_DOWN), 1)
    except AssertionError:
        if rehomes:
            raise
        facts["fence_to_rehomed_s"] = None  # nova: they wait for the dead service

    # 3. Every server of the dead service rebooted and deleted through nova's API
    # (nova's driver: a reboot never completes; a delete there would be nova-api's
    # local delete, which leaves the node deployed, so it is not tried).
    operable = [cloud.nova.operable(s, timeout=60) for s in victim_servers]
    facts["servers_operable_after"] = [sum(operable), len(victim_servers)]
    if all(operable):
        for server in victim_servers:
            cloud.nova.delete(server)
            cloud.nova.wait_gone(server)
            wait_for(lambda n=servers[server]: made.ironic.get(n)["instance_uuid"] is None,
                     60, "the deleted server's node freed in Ironic")
            del servers[server]

    # 4. The dead service comes back.
    restarted_at = time.time()
    ha.restart(cloud, made, victim)
    wait_for(lambda: all(len(h) == 1 for h in cloud.homes(made.nodes).values()), 60,
             "one compute node record per node")
    time.sleep(2 * ha.PERIODIC)  # the ring settles: every service has run its tracker
    held_elsewhere = {servers[s] for s in servers
                      if cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] != victim}
    facts["taken_back_with_instance_elsewhere"] = sorted(
        held_elsewhere & ha.claimed_since(made, victim, restarted_at)) if rehomes else []
    facts["homes_after_return"] = cloud.homes(made.nodes)
    facts["servers_operable_after_return"] = [
        sum(cloud.nova.operable(s, timeout=60) for s in servers), len(servers)]
    facts["servers"] = dict(servers)
    facts["victim"] = victim
    return facts


def unset_maintenance_and_offer(cloud, made, node):
    made.ironic.set_maintenance(node, False)
    wait_for(lambda: node in cloud.offered(made), 3 * ha.PERIODIC + 30,
             "the node out of maintenance offered again")


def integrity(cloud, made, servers):
    return {"records_deleted": cloud.deleted_records(made.nodes),
            "providers_deleted": cloud.deleted_providers(made.nodes),
            "allocations_lost": cloud.allocations_lost(servers),
            "records_duplicated": sum(len(h) > 1 for h in cloud.homes(made.nodes).values())}


@pytest.fixture(scope="module")
def stock(cloud, request, tmp_path_factory):
    """nova's own driver, three services, no shard: the reference, run first.  Its
    services are stopped however this ends: without a shard they would claim every
    later node, the other suites' too.  One server is left on a stock service, down from
    then on: a service of no rp_reporter group, in the same cell, with a server on an
    Ironic node, which ours must never fence; deleted (nova's local delete, its node
    torn down in Ironic) once ours is done.  Where the reference's own figures are left
    out (``-m "not reference"``, CI's nova-cloud), only that server is booted."""
    made = ha.make_fleet(cloud.stack, cloud.nova, tmp_path_factory.mktemp("stock"),
                         "stock", "stock", "")
    reference = "not reference" not in (request.config.option.markexpr or "")
    with ha.running(cloud, made):
        if reference:
            victim, facts = killed(cloud, made, "stock", rehomes=False)
            left = next(s for s in facts["servers"] if host_of(cloud, s) != victim)
        else:
            ha.start_fleet(cloud, made)
            left = cloud.nova.boot("ha-stock-left", made.flavor)
            built = cloud.nova.wait_built(left)
            assert built["status"] == "ACTIVE", built
            facts = {"servers": {left: built["OS-EXT-SRV-ATTR:hypervisor_hostname"]}}
        for server in [s for s in facts["servers"] if s != left]:
            cloud.nova.delete(server)
            cloud.nova.wait_gone(server)
    if reference:
        cloud.results["stock"] = row(facts, resumed=False, double_claimed=None,
                                     lease=None)
    cloud.results["stock_hosts"] = list(made.hosts)
    yield facts
    cloud.nova.delete(left)  # its service is down: nova-api deletes it locally
    cloud.nova.wait_gone(left)
    made.ironic.provision(facts["servers"][left], "deleted", "available")


@pytest.fixture(scope="module")
def ours(cloud, request, tmp_path_factory):
    """rp_reporter's driver, peers_from = coordination, three services on one shard;
    after stock's story, unless only the every_release part runs (``-m every_release``:
    the kill and the re-homing, their integrity)."""
    every_release_only = request.config.option.markexpr == "every_release"
    only = request.config.getoption("--ha-stories")
    if not (every_release_only or only):
        request.getfixturevalue("stock")
    workdir = tmp_path_factory.mktemp("ours")
    every_instant = "not every_instant" not in (request.config.option.markexpr or "")
    # the stories that cut one service off its bus: every_instant's, or asked by name
    made = ha.make_fleet(cloud.stack, cloud.nova, workdir, "ours", "rp_reporter", "shard-ha",
                         bus_relay=("cut_deploy" in only.split(",") if only
                                    else every_instant and not every_release_only))
    with ha.running(cloud, made):  # the cloud goes on (tests/nova_cloud's, next)
        if only:
            yield some_stories(cloud, made, only.split(","))
        elif every_release_only:
            _, facts = killed(cloud, made, "ours", rehomes=True)
            cloud.results.update(killed=dict(facts))
            yield facts
        else:
            # A mover stopped at each instant of a move or a fence takes about two
            # minutes an instant: tox -e nova-ha runs them all; CI's nova-cloud runs
            # one (-m "not every_instant").
            yield ours_facts(cloud, made, every_instant)


def killed(cloud, made, name, rehomes):
    """The fleet started, servers placed and one service killed: what happened to its
    free nodes and its servers (moved when ``rehomes``), then the fleet's integrity;
    returns (the service killed, the facts)."""
    ha.start_fleet(cloud, made)
    victim, servers, in_maintenance = place_servers(cloud, made, name)
    facts = kill_and_watch(cloud, made, victim, servers, in_maintenance, rehomes)
    print(f"\n{name}, a service killed: {facts}")
    unset_maintenance_and_offer(cloud, made, in_maintenance)
    facts.update(integrity(cloud, made, facts["servers"]))
    return victim, facts


def ours_facts(cloud, made, every_instant):
    """Every fault ours is put through, in order, and what each showed; with
    ``every_instant``, a mover stopped at every step of a move and of a fence (after
    one step of a move, if not)."""
    ha.start_fleet(cloud, made)
    facts_anti = anti_affinity(cloud, made)
    print(f"\nours, an anti-affinity group after quiet periodics: {facts_anti}")
    if every_instant:  # a kill's move, beside the one below: nova-ha's (a minute of CI's)
        facts_anti["move"] = anti_affinity_through_a_move(cloud, made)
        print(f"\nours, an anti-affinity group's member on a killed service: "
              f"{facts_anti['move']}")
    victim, servers, in_maintenance = place_servers(cloud, made, "ours")
    facts = kill_and_watch(cloud, made, victim, servers, in_maintenance, rehomes=True)
    print(f"\nours, a service killed: {facts}")
    unset_maintenance_and_offer(cloud, made, in_maintenance)
    facts["partition"] = partition(cloud, made, facts["servers"])
    print(f"\nours, a service partitioned: {facts['partition']}")
    facts["mover"] = mover_killed(cloud, made, facts["servers"])
    print(f"\nours, a mover killed: {facts['mover']}")
    facts["movers"] = [facts["mover"]]
    if every_instant:  # the other steps of a move, each its own mover killed there
        for step in (s for s in hooks.PAUSE_POINTS if s != "action"):
            facts["movers"].append(mover_killed(cloud, made, facts["servers"], step))
            print(f"\nours, a mover killed after the step {step!r}: {facts['movers'][-1]}")
        facts["rejoin"] = forced_down_as_it_rejoins(cloud, made, facts["servers"])
        print(f"\nours, forced down as it rejoined: {facts['rejoin']}")
        facts["operator_flags"] = [operator_flag_kept(cloud, made, facts["servers"], how)
                                   for how in OPERATOR_FLAGS]
        print(f"\nours, an operator's flag through a mover's cycle: {facts['operator_flags']}")
        facts["held"] = held_for_an_upgrade(cloud, made, facts["servers"])
        print(f"\nours, held for an upgrade, stopped and started: {facts['held']}")
        facts["held_faults"] = [held_for_an_upgrade(cloud, made, facts["servers"], fault)
                                for fault in HOLD_FAULTS]
        print(f"\nours, held through a mover's clock step, a flush: {facts['held_faults']}")
        facts["double_claimed_max_s"] = double_claimed_before_the_pauses(made)
        facts["stale_mover"] = mover_paused(cloud, made, facts["servers"])
        print(f"\nours, a mover paused mid-move and resumed after: {facts['stale_mover']}")
        facts["stale_mover_hidden"] = hidden_pause_of_a_mover(cloud, made, facts["servers"])
        print(f"\nours, a mover paused mid-move, the pause hidden from its clocks: "
              f"{facts['stale_mover_hidden']}")
        facts["queued_restart"] = queued_past_a_survivors_restart(cloud, made, facts["servers"])
        print(f"\nours, a queued build past a survivor's restart: {facts['queued_restart']}")
        facts["hidden_pause"] = hidden_pause_during_deploy(cloud, made)
        print(f"\nours, a deploy paused, the pause hidden from its clocks: "
              f"{facts['hidden_pause']}")
        facts["hidden_pause_delete"] = hidden_pause_of_a_delete(cloud, made, facts["servers"])
        print(f"\nours, a delete asked of a service paused, the pause hidden from its "
              f"clocks: {facts['hidden_pause_delete']}")
        facts["orphan"] = deleted_while_down(cloud, made, facts["servers"])
        print(f"\nours, a server deleted while its service was down: {facts['orphan']}")
        facts["paused_after_vifs"] = paused_after_its_vifs(cloud, made)
        print(f"\nours, a build paused after its VIFs: {facts['paused_after_vifs']}")
        facts["cut_deploy"] = cut_during_deploy(cloud, made)
        print(f"\nours, cut off from the backend and the bus in a deploy: "
              f"{facts['cut_deploy']}")
    facts.setdefault("double_claimed_max_s", double_claimed_before_the_pauses(made))
    facts["pause"] = pause_and_resume(cloud, made, facts["servers"])
    print(f"\nours, a service paused and resumed: {facts['pause']}")
    facts["deploy"] = killed_during_deploy(cloud, made)
    print(f"\nours, a service killed during a deploy: {facts['deploy']}")
    facts["paused_deploy"] = paused_during_deploy(cloud, made)
    print(f"\nours, a service paused during a deploy: {facts['paused_deploy']}")
    facts["queued"] = build_queued_to_the_dead(cloud, made)
    print(f"\nours, a build queued to a service that died: {facts['queued']}")
    facts["anti_affinity"] = facts_anti
    facts["replacement"] = replacement_host(cloud, made, facts["servers"])
    print(f"\nours, every service killed, a new host: {facts['replacement']}")
    facts.update(integrity(cloud, made, facts["servers"]))
    cloud.results.update(row(facts, resumed=facts["mover"]["resumed"],
                             double_claimed=facts["double_claimed_max_s"], lease=ha.LEASE))
    cloud.results["partition"] = dict(facts["partition"])
    cloud.results.update(
        pause_resume_actions_on_moved=facts["pause"]["actions_on_moved"]
        + facts["pause"]["ironic_writes_on_moved"],
        replacement_host_ok=facts["replacement"]["ok"],
        stuck_task_states_after=facts["replacement"].get("stuck_task_states"),
        moves_per_server_max=max(facts["pause"]["moves_per_server_max"],
                                 facts["replacement"]["moves_per_server_max"]),
        pause=dict(facts["pause"]), replacement=dict(facts["replacement"]),
        deletes_lost=facts["pause"]["deletes_lost"],
        reboots_lost=facts["pause"]["reboots_lost"],
        ports_deallocated_on_moved=facts["pause"]["ports_deallocated_on_moved"],
        builds_stuck=facts["deploy"]["builds_stuck"], deploy=dict(facts["deploy"]),
        spawns_lost=facts["paused_deploy"]["spawns_lost"],
        queued_builds_stuck=facts["queued"]["queued_builds_stuck"], queued=dict(facts["queued"]),
        paused_deploy=dict(facts["paused_deploy"]),
        antiaffinity_builds_failed=facts_anti["failed"], anti_affinity=dict(facts_anti),
        foreign_services_forced_down=foreign_forced_down(cloud),
        notification_errors=notification_errors(cloud), upcalls=upcalls(cloud),
        moves_left_unfinished=sum(not mover["resumed"] for mover in facts["movers"]),
        movers=[dict(mover) for mover in facts["movers"]])
    if "rejoin" in facts:
        cloud.results.update(
            anti_affinity_members_moved_together=facts_anti["move"]["moved_onto_one_service"],
            stuck_forced_down=facts["rejoin"]["stuck_forced_down"], rejoin=facts["rejoin"],
            operator_flags_cleared=sum(f["operator_flags_cleared"]
                                       for f in facts["operator_flags"]),
            operator_flags=facts["operator_flags"], held_for_an_upgrade=facts["held"],
            held_fenced_or_moved=facts["held"]["fenced_or_moved_while_held"],
            holds_bypassed=sum(f["fenced_or_moved_while_held"] for f in facts["held_faults"]),
            held_faults=facts["held_faults"],
            stale_mover_writes=facts["stale_mover"]["stale_mover_writes"]
            + facts["stale_mover_hidden"]["stale_mover_writes"],
            stale_mover=facts["stale_mover"], stale_mover_hidden=facts["stale_mover_hidden"],
            queued_builds_stranded=facts["queued_restart"]["queued_builds_stranded"],
            queued_restart=facts["queued_restart"],
            writes_while_record_unread=facts["cut_deploy"]["writes_while_record_unread"],
            hidden_pause_losses=facts["hidden_pause"]["hidden_pause_losses"]
            + facts["hidden_pause_delete"]["hidden_pause_losses"],
            hidden_pause_delete=facts["hidden_pause_delete"],
            orphaned_nodes_found=facts["orphan"]["orphaned_nodes_found"],
            orphan=facts["orphan"],
            hidden_pause=facts["hidden_pause"],
            builds_stuck_after_pause=facts["paused_after_vifs"]["builds_stuck_after_pause"],
            paused_after_vifs=facts["paused_after_vifs"],
            cut_deploy=facts["cut_deploy"])
    for key in ("foreign_services_forced_down", "notification_errors", "upcalls",
                "moves_left_unfinished"):
        facts[key] = cloud.results[key]
    # after the stories' count: the staged one is not theirs
    facts["staged_upcall"] = staged_upcall(cloud, made)
    print(f"\nours, a staged upcall: {facts['staged_upcall']}")
    cloud.results["staged_upcall_counted"] = facts["staged_upcall"]["counted"]
    return facts


def double_claimed_before_the_pauses(made):
    """The longest time one node had two managing services so far, by their own logs:
    read before the first story that pauses a service (SIGSTOP).  A paused service logs
    no release until it resumes, and one that fences itself then restarts in place (no
    kill ends what it held): the spans read from its log would count the pause, and
    what followed it, as two managers (a run read 206 s so, 2.1 s before the pauses)."""
    return ha.double_claimed_max_s(ha.managed_spans(made, time.time()))


def some_stories(cloud, made, names):
    """Only the stories ``names`` (``--ha-stories``), on a fleet just started."""
    ha.start_fleet(cloud, made)
    servers = {}
    facts = {}
    for name in names:
        try:
            facts[name] = STORIES[name](cloud, made, servers)
        except Exception as e:  # noqa: BLE001 - the next stories still run; its tests fail
            facts[name] = {"story_failed": repr(e)[:500]}
        print(f"\nours, {name}: {facts[name]}")
    return facts


def foreign_forced_down(cloud):
    """Compute services of no rp_reporter group (the stock fleet's, down since its story
    ended, one with a server left on it) that are forced down."""
    return sum(bool((cloud.nova.compute_service(host) or {}).get("forced_down"))
               for host in cloud.results.get("stock_hosts", []))


def row(facts, resumed, double_claimed, lease):
    return {"kill_to_free_schedulable_s": facts["kill_to_free_schedulable_s"],
            "fence_to_rehomed_s": facts["fence_to_rehomed_s"],
            "servers_operable_after": facts["servers_operable_after"],
            "double_claimed_max_s": double_claimed,
            "records_deleted": facts["records_deleted"],
            "providers_deleted": facts["providers_deleted"],
            "allocations_lost": facts["allocations_lost"],
            "resumed_after_mover_killed": resumed,
            "lease_s": lease, "periodic_s": ha.PERIODIC}


def partition(cloud, made, servers):
    """One live service cut off from the coordination backend while nova still sees
    it up: it stops claiming free nodes (the others take them) and its servers stay
    its own; then the cut heals."""
    homes = {node: hosts[0] for node, hosts in cloud.homes(made.nodes).items()}
    held = {s: cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] for s in servers}
    # The service with a server and the most free nodes: both halves of the promise.
    cut = max(set(held.values()), key=lambda h: sum(
        home == h and n not in servers.values() for n, home in homes.items()))
    its_servers = [s for s in servers if held[s] == cut]
    its_free = [n for n, h in homes.items() if h == cut and n not in servers.values()]
    cut_at = time.time()
    made.cut_backend(cut)
    facts = {"host": cut, "free_nodes": len(its_free)}
    try:
        wait_for(lambda: all(cloud.home(n) not in (cut, None) for n in its_free)
                 and set(its_free) <= cloud.offered(made),
                 ha.LEASE + 3 * ha.PERIODIC + 30, "the partitioned service's free nodes "
                 "taken by the others")
        facts["free_taken_over_s"] = round(time.time() - cut_at, 1)
        time.sleep(ha.SERVICE_DOWN)  # long enough for a wrong fence to act
        facts["servers_moved"] = sum(cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] != cut
                                     for s in its_servers)
        facts["servers_operable"] = [sum(cloud.nova.operable(s, timeout=60)
                                         for s in its_servers), len(its_servers)]
        facts["nova_saw_it_up"] = cloud.nova.compute_up(cut)
    finally:
        made.heal_backend(cut)
    healed_at = time.time()
    wait_for(lambda: ha.ring_logged(made, cut, healed_at), ha.LEASE + 3 * ha.PERIODIC + 30,
             "the healed service a ring member again")
    return facts


HOOK = "RP_REPORTER_TEST_REHOME_PAUSE_AFTER"  # hooks.pause_after


def restarted_with(cloud, made, env):
    """Every service restarted with ``env`` (a test hook's, or none; or host -> its env),
    the fleet settled
    and each service reporting to nova since: nova's start-up has run (a build booked on
    a node of a service still starting is put in ERROR by nova's own start-up,
    ``_error_out_instances_whose_build_was_interrupted``)."""
    since = ha.utc_now()
    for host in made.hosts:
        if env:
            made.envs[host] = dict(env(host) if callable(env) else env)
        else:
            made.envs.pop(host, None)
        made.start(cloud.stack, host)
    for host in made.hosts:
        wait_for(lambda h=host: ha.member_logged(made, h), 120, f"{host} restarted")
    wait_for(lambda: all(len(h) == 1 for h in cloud.homes(made.nodes).values())
             and len(cloud.offered(made)) >= 3, 120, "the fleet settled after restart")
    for host in made.hosts:
        wait_for(lambda h=host: cloud.nova.compute_up(h, since), 120,
                 f"{host} reporting since its restart")


def a_server_on_a_service(cloud, made, servers, name):
    """A server booted on a free node of some service; (that service, the server),
    the server added to ``servers`` ({server: node})."""
    homes = {node: hosts[0] for node, hosts in cloud.homes(made.nodes).items()}
    offered = cloud.offered(made)
    victim = next(h for h in made.hosts if any(homes[n] == h for n in offered))
    node = next(n for n in offered if homes[n] == victim)
    server = cloud.nova.boot(name, made.flavor, host=victim, node=node)
    assert cloud.nova.wait_built(server)["status"] == "ACTIVE"
    servers[server] = node
    return victim, server


def paused_survivor(made, survivors, step):
    """The survivor that logged the test hook's pause after ``step``, or None."""
    return next((h for h in survivors
                 if f"after the move's step '{step}'" in made.since(h)), None)


def mover_killed(cloud, made, servers, step="action"):
    """A mover killed right after the step ``step`` of a move (``hooks.PAUSE_POINTS``;
    by default between moving an instance and its compute node record) is finished by
    the next ring owner once the mover is fenced in turn."""
    restarted_with(cloud, made, {HOOK: f"{step}={REHOME_PAUSE}"})
    victim, server = a_server_on_a_service(cloud, made, servers, "ha-mover")
    moving = [s for s in servers if cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] == victim]
    made.kill(cloud.stack, victim)
    survivors = [h for h in made.hosts if h != victim]
    mover = None

    def paused():
        nonlocal mover
        mover = paused_survivor(made, survivors, step)
        return mover
    wait_for(paused, FENCED_AFTER_KILL + 3 * ha.PERIODIC + 30,
             f"a survivor paused after the move's step {step!r}")
    made.kill(cloud.stack, mover)
    last = next(h for h in survivors if h != mover)
    facts = {"step": step, "mover": mover, "finished_by": last, "servers": len(moving)}
    try:
        wait_for(lambda: all(cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] == last
                             and cloud.home(servers[s]) == last for s in moving),
                 FENCED_AFTER_KILL + 3 * ha.PERIODIC + len(moving) * REHOME_PAUSE + 30,
                 "the next owner finishing")
        facts["resumed"] = all(cloud.nova.operable(s, timeout=60) for s in moving)
    except AssertionError:
        facts["resumed"] = False
    for host in (victim, mover):  # back to three, without the pause
        made.envs.pop(host, None)
        ha.restart(cloud, made, host)
    if step != "action":  # the first story's server stays for the stories after it
        story_server_deleted(cloud, servers, server)
    return facts


def mover_paused(cloud, made, servers, step="host", hidden_by=None, env=None):
    """A mover paused (SIGSTOP) right after it wrote a server's host, past its lease and
    nova's service_down_time: the last survivor fences it and finishes the move; then
    the mover resumes (SIGCONT) in the middle of its move.  A holder that lost its turn
    writes nothing: the server and its node's compute node record stay on the last
    survivor (the mover once wrote the record back onto itself, so that a later delete
    of its service passed nova's "no instances" check and took the node's provider and
    allocation with it), and the mover restarts before its next write.  ``hidden_by``
    and ``env``: as with_hidden_pauses gives them, to hide the pause from its clocks."""
    restarted_with(cloud, made, lambda host: {**(env(host) if env else {}),
                                              HOOK: f"{step}={REHOME_PAUSE}"})
    victim, server = a_server_on_a_service(cloud, made, servers, "ha-stale-mover")
    moving = [s for s in servers if host_of(cloud, s) == victim]
    made.kill(cloud.stack, victim)
    survivors = [h for h in made.hosts if h != victim]
    mover = wait_until(lambda: paused_survivor(made, survivors, step), bool,
                       FENCED_AFTER_KILL + 3 * ha.PERIODIC + 30,
                       f"a survivor paused after the move's step {step!r}")
    last = next(h for h in survivors if h != mover)
    paused = cloud.stack.service(f"nova-compute-{mover}")
    paused.signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    facts = {"step": step, "mover": mover, "finished_by": last, "servers": len(moving),
             "hidden": bool(hidden_by)}
    try:
        facts["finished"] = seen_within(lambda: all(
            host_of(cloud, s) == last and cloud.home(servers[s]) == last for s in moving),
            FENCED_AFTER_KILL + 3 * ha.PERIODIC + len(moving) * REHOME_PAUSE + 30)
    finally:
        if hidden_by:
            hidden_by[mover].write_text(f"{time.monotonic() - stopped_at:.3f}")
        paused.signal(signal.SIGCONT)
    time.sleep(REHOME_PAUSE + 2 * ha.REPORT)  # its hook's sleep is over, a round runs
    facts["stale_mover_writes"] = sum(
        host_of(cloud, s) != last or cloud.home(servers[s]) != last for s in moving)
    facts["self_fenced"] = made.since(mover).count("self-fenced: ")
    for host in (victim, mover):  # back to three, without the pause
        made.envs.pop(host, None)
        ha.restart(cloud, made, host)
    story_server_deleted(cloud, servers, server)
    return facts


def queued_past_a_survivors_restart(cloud, made, servers=None):
    """A build cast to a service that dies before it takes it, while an operator holds
    that service (so it is not fenced yet): the survivor that takes the build's node over
    reads the build there, then restarts before the hold is released.  Once released,
    the service is fenced and a survivor ends the build (ERROR, its allocation given
    back, the node offered again): what it was to do was in the group's record, not in
    the restarted survivor's memory (where it once was, and the build stayed in BUILD
    for ever with its node allocated)."""
    node, victim = a_free_node(cloud, made)
    compute_group(cloud, made, "hold", f"nova-{made.name}", victim, "--minutes", "10")
    service = cloud.stack.service(f"nova-compute-{victim}")
    service.signal(signal.SIGSTOP)
    try:
        server = cloud.nova.boot("ha-queued-restart", made.flavor, host=victim, node=node)
        wait_for(lambda: cloud.placement.allocations(server), 60,
                 "the build's allocation on the paused service's node")
    finally:
        made.kill(cloud.stack, victim)
    facts = {"host": victim}
    try:
        facts["taken_over_by"] = taker = wait_until(
            lambda: cloud.home(node), lambda h: h not in (victim, None),
            ha.LEASE + 3 * ha.PERIODIC + 30, "the build's node taken over")
        ha.restart(cloud, made, taker)
    finally:
        compute_group(cloud, made, "release", f"nova-{made.name}", victim)
    facts["status"] = out_of_build(cloud, server)["status"]
    facts["node_offered"] = offered_again(cloud, made, node, 3 * ha.PERIODIC + 30)
    facts["allocations_left"] = len(cloud.placement.allocations(server) or {})
    facts["queued_builds_stranded"] = int(facts["status"] != "ERROR" or not facts["node_offered"]
                                          or facts["allocations_left"] > 0)
    cloud.nova.delete(server)
    cloud.nova.wait_gone(server)
    ha.restart(cloud, made, victim)
    return facts


def story_server_deleted(cloud, servers, server):
    """A story's own server deleted (the fleet has 9 nodes, and each story of a mover
    stopped at an instant takes one): its node is free for the next."""
    cloud.nova.delete(server)
    cloud.nova.wait_gone(server)
    servers.pop(server, None)


def seen_within(check, timeout):
    """Whether ``check()`` held at some moment within ``timeout`` seconds."""
    try:
        wait_for(check, timeout, "a story's moment", interval=0.5)
    except NotSeen:
        return False
    return True


def forced_down_as_it_rejoins(cloud, made, servers):
    """A mover decided to fence a dead service (its last reads: no live member, no
    report), and the service came back right then: it is forced down just after it
    rejoined, and no lapse of its own follows.  It clears the mover's flag itself
    within a report interval; its server stays."""
    restarted_with(cloud, made, {HOOK: f"fence decided={REJOIN_PAUSE}"})
    victim, server = a_server_on_a_service(cloud, made, servers, "ha-rejoin")
    made.kill(cloud.stack, victim)
    survivors = [h for h in made.hosts if h != victim]
    wait_for(lambda: paused_survivor(made, survivors, "fence decided"),
             FENCED_AFTER_KILL + 3 * ha.PERIODIC + 30, "a survivor deciding the fence")
    made.envs.pop(victim, None)
    made.start(cloud.stack, victim)
    wait_for(lambda: ha.member_logged(made, victim), 120, f"{victim} a member again")

    def forced():
        return bool((cloud.nova.compute_service(victim) or {}).get("forced_down"))
    seen = seen_within(forced, REJOIN_PAUSE + 2 * SLACK)
    at = time.monotonic()
    seen_within(lambda: not forced(), ha.LEASE + ha.REPORT + SLACK)
    facts = {"victim": victim, "forced_down_seen": seen,
             "cleared_after_s": round(time.monotonic() - at, 1),
             "stuck_forced_down": int(forced()), "server_stayed": host_of(cloud, server) == victim}
    restarted_with(cloud, made, None)
    story_server_deleted(cloud, servers, server)
    return facts


# How an operator sets a flag on a service a mover forced down: lifted, then set again
# after the movers' rounds saw it lifted; set again with no lift (a no-op in nova's
# database); lifted and set again at once, within one of the movers' rounds.  Only
# nova's service.update notification shows the last two (``operator_flags``).
OPERATOR_FLAGS = {"lifted_then_set": (False, True), "set_again": (True,),
                  "lifted_and_set_at_once": (False, True)}


def operator_flag_kept(cloud, made, servers, how="lifted_then_set"):
    """A mover forced a dead service down and moved its server; an operator set the
    flag while the service was still dead (``OPERATOR_FLAGS[how]``, an evacuation tool
    say).  The service comes back and keeps the operator's flag."""
    victim, server = a_server_on_a_service(cloud, made, servers, f"ha-operator-{how}")
    made.kill(cloud.stack, victim)
    wait_for(lambda: host_of(cloud, server) not in (None, victim),
             FENCED_AFTER_KILL + 3 * ha.PERIODIC + 30, f"{server} moved off {victim}")
    for i, forced_down in enumerate(OPERATOR_FLAGS[how]):
        if i and how == "lifted_then_set":
            time.sleep(2 * ha.REPORT + SLACK)  # the movers' rounds: a name whose flag is lifted
        cloud.nova.set_forced_down(victim, forced_down)
    time.sleep(SLACK)  # the notification's way to a live member
    made.start(cloud.stack, victim)
    wait_for(lambda: ha.member_logged(made, victim), 120, f"{victim} a member again")
    time.sleep(2 * ha.REPORT + SLACK)  # its own reads of its flag
    kept = bool(cloud.nova.compute_service(victim)["forced_down"])
    cloud.nova.set_forced_down(victim, False)  # the operator's, when done
    wait_for(lambda: cloud.nova.compute_up(victim), 120, f"{victim} up again")
    story_server_deleted(cloud, servers, server)
    return {"victim": victim, "how": how, "operator_flag_kept": kept,
            "operator_flags_cleared": int(not kept)}


def compute_group(cloud, made, *args):
    """``rp-reporter compute-group ARGS``, as an operator runs it."""
    return operator_cli(cloud.stack, "compute-group", *args)


HOLD_FAULTS = ("clock_step", "flush")  # what a hold must survive (``held_for_an_upgrade``)


def held_for_an_upgrade(cloud, made, servers, fault=None):
    """A restart for an upgrade is not a death: an operator holds a service
    (``compute-group hold``), stops it past its lease and nova's service_down_time,
    and starts it again.  It is never forced down, its server never moves, and the
    server is operable once it is back; then the hold is released.  ``fault``, while
    it is down: "clock_step", every other service's wall clock stepped past the hold's
    bound (their monotonic clocks go on); "flush", the coordination backend flushed
    (the holds lost with the rest of the record: written back by the survivors)."""
    steps = {}
    if fault == "clock_step":
        steps = {h: pathlib.Path(cloud.stack.workdir, f"clock-step-{h}") for h in made.hosts}
        for step in steps.values():
            step.write_text("0")
        restarted_with(cloud, made, lambda host: {
            "PYTHONPATH": nova.CLOCK_SHIM, "RP_TEST_CLOCK_STEP": "1",
            "RP_TEST_CLOCK_OFFSET_FILE": str(steps[host])})
    try:
        victim, server = a_server_on_a_service(cloud, made, servers, f"ha-held-{fault}")
        compute_group(cloud, made, "hold", f"nova-{made.name}", victim, "--minutes", "10")
        time.sleep(ha.REPORT + SLACK)  # every mover's round read the hold
        made.kill(cloud.stack, victim)  # the worst a stop can be
        if fault == "clock_step":
            for host, step in steps.items():
                if host != victim:  # the movers': an hour ahead, past the 10 minutes
                    step.write_text(str(-3600))
        elif fault == "flush":
            (etcd if cloud.stack.coordination == "etcd" else redis).flush(cloud.stack)
        forced = seen_within(lambda: bool(cloud.nova.compute_service(victim)["forced_down"])
                             or host_of(cloud, server) != victim,
                             FENCED_AFTER_KILL + 3 * ha.PERIODIC + SLACK)
        ha.restart(cloud, made, victim)
        facts = {"victim": victim, "fault": fault, "fenced_or_moved_while_held": int(forced),
                 "server_stayed": host_of(cloud, server) == victim,
                 "operable_after": cloud.nova.operable(server, timeout=60)}
        compute_group(cloud, made, "release", f"nova-{made.name}", victim)
        story_server_deleted(cloud, servers, server)
    finally:
        if steps:
            restarted_with(cloud, made, None)
    return facts


def deleted_while_down(cloud, made, servers):
    """A server deleted while its compute service is down is deleted locally by nova's
    API (stock nova alike): its node stays deployed, owned by nothing.  The service is
    held by an operator (so no survivor moves its server first), killed, and once nova
    reports it down its server is deleted; the survivor the ring gives the node to finds
    the node after the grace (``orphaned_nodes_grace``), says so once and, turned on in
    this suite, undeploys it: the node is offered again.  A node whose server nova still
    has is never touched (the server on the held service stays deployed)."""
    victim, server = a_server_on_a_service(cloud, made, servers, "ha-orphan")
    node = servers.pop(server)
    kept = next((s for s in servers if host_of(cloud, s) == victim), None)
    compute_group(cloud, made, "hold", f"nova-{made.name}", victim, "--minutes", "10")
    made.kill(cloud.stack, victim)
    facts = {"host": victim}
    try:
        # nova's API decides a local delete by its own service_down_time (nova's
        # default, 60 s: the suite shortens only the computes')
        wait_for(lambda: not cloud.nova.compute_up(victim), 60 + 2 * ha.REPORT + 30,
                 "nova's API reporting the killed service down")
        cloud.nova.delete(server)  # nova's API: a local delete
        cloud.nova.wait_gone(server)
        facts["left_deployed"] = made.ironic.get(node)["instance_uuid"] == server
        facts["undeployed"] = seen_within(
            lambda: made.ironic.get(node)["instance_uuid"] is None,
            ha.ORPHAN_GRACE + 3 * ha.PERIODIC + 60)
        facts["node_offered"] = offered_again(cloud, made, node, 3 * ha.PERIODIC + 60)
        facts["said"] = sum(made.since(h).count(f"node {node} is deployed for server")
                            for h in made.hosts if h != victim)
        facts["kept_server_deployed"] = kept is None or made.ironic.get(
            servers[kept])["instance_uuid"] == kept
    finally:
        ha.restart(cloud, made, victim)
        compute_group(cloud, made, "release", f"nova-{made.name}", victim)
    facts["orphaned_nodes_found"] = int(facts["said"] >= 1 and facts["undeployed"])
    return facts


def ironic_writes(cloud, mark, nodes):
    """Requests that change a node (PUT, PATCH, POST, DELETE) on any of ``nodes`` in
    Ironic's API log after byte ``mark``."""
    with open(pathlib.Path(cloud.stack.workdir, "ironic.log"), "rb") as log:
        log.seek(mark)
        text = log.read().decode(errors="replace")
    return sum(len(re.findall(rf" - (?:PUT|PATCH|POST|DELETE) /v1/nodes/{n}\b", text))
               for n in nodes)


def after(at, since):
    """An event's start time (nova's ISO text, UTC) at or after ``since``."""
    return datetime.datetime.fromisoformat(at[:19]) >= since.replace(microsecond=0)


def rehomes_of(cloud, server, since):
    """Re-homing moves of the server since ``since`` (its instance actions)."""
    return sum(event == rehome.ACTION and after(at, since)
               for _, event, _, at, _ in cloud.nova.events(server))


class Flushing:
    """The coordination backend losing all its data (members, locks) every ``every``
    seconds from ``after`` seconds on, until stopped: until each member joins again,
    the members' views of the group differ and a lock held may be gone."""

    def __init__(self, stack, after, every):
        self.count, self.errors, self._stopped = 0, [], threading.Event()

        def run():
            self._stopped.wait(after)
            while not self._stopped.is_set():
                try:
                    (etcd if stack.coordination == "etcd" else redis).flush(stack)
                    self.count += 1
                except OSError as e:  # a slow backend under a whole run's load: try again
                    self.errors.append(repr(e))
                self._stopped.wait(every)
        self._thread = threading.Thread(target=run, name="flushing", daemon=True)
        self._thread.start()

    def stop(self, at_least):
        """Stop once ``at_least`` flushes were made (the story needs them, however fast
        the moves were); returns how many."""
        wait_for(lambda: self.count >= at_least or len(self.errors) > 10, 60,
                 f"{at_least} flushes of the backend")
        self._stopped.set()
        self._thread.join()
        assert self.count >= at_least, (self.count, self.errors)
        return self.count


def pause_and_resume(cloud, made, servers, hidden_by=None):
    """The service holding the most servers paused (SIGSTOP) past its lease and nova's
    service_down_time, a reboot of one of its servers and a delete of another asked
    while nova still saw it up (queued for it, as in production); its servers re-homed
    meanwhile, while the coordination backend loses its data every 2 s (disagreeing
    views: two survivors each may think a node its own, and a node's lock may vanish
    under its holder); then it resumes (SIGCONT).  It must act on none of them: no
    Ironic write on their nodes, no instance action event of its own after the move, no
    port deallocated; each server moved once, to one host (never two hosts seen).  The
    new homes carry out what was asked of it (nova's _init_instance): the reboot, and
    the delete with its node cleaned.  Then each server left is rebooted and deleted
    through nova's API.  ``hidden_by``: {host: its clock shim's offset file}, to hide the
    pause from the service's clocks."""
    if not servers:  # the stories before deleted every one: a server for it to hold
        a_server_on_a_service(cloud, made, servers, "ha-paused-1")
    placed = {s: cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] for s in servers}
    victim = max(made.hosts, key=lambda h: sum(host == h for host in placed.values()))
    theirs = [s for s, host in placed.items() if host == victim]
    assert theirs, f"no server on any service: {placed}"
    if len(theirs) < 2:  # one to reboot, one to delete
        node = next(n for n in sorted(cloud.offered(made)) if cloud.home(n) == victim)
        server = cloud.nova.boot("ha-paused-2", made.flavor, host=victim, node=node)
        assert cloud.nova.wait_built(server)["status"] == "ACTIVE"
        servers[server] = node
        theirs.append(server)
    rebooted, deleted = theirs[:2]
    deleted_node = servers[deleted]
    paused_at = ha.utc_now()
    service = cloud.stack.service(f"nova-compute-{victim}")
    seen = {s: set() for s in theirs}  # the hosts each server was seen on, after the pause

    def moved():
        for server in theirs:
            seen[server].add(host_of(cloud, server))
        return all(seen[s] - {victim} for s in theirs)

    def delete_done():
        return (cloud.nova.server(deleted) is None
                and made.ironic.get(deleted_node)["instance_uuid"] is None)

    def reboot_done():
        return any(event == "compute_reboot_instance" and host not in (None, victim)
                   and result == "Success" and after(at, paused_at)
                   for _, event, host, at, result in cloud.nova.events(rebooted))
    service.signal(signal.SIGSTOP)
    paused_for = time.monotonic()
    flushing = Flushing(cloud.stack, after=ha.LEASE - 2, every=2)
    facts = {"host": victim, "servers": len(theirs)}
    try:
        time.sleep(3)
        # nova still sees it up: the casts wait for it
        cloud.nova.reboot(rebooted)
        cloud.nova.delete(deleted)
        wait_for(moved, FENCED_AFTER_KILL + 3 * ha.PERIODIC + 60,
                 "the paused service's servers re-homed (or the deleted one gone)")
        time.sleep(ha.REPORT)  # one more round of the survivors' job, still flushing
        # What was asked of the paused service, carried out by the new homes (nova's
        # _init_instance): the delete (server gone, node cleaned) and the reboot.
        for what, done in (("deletes_lost", delete_done), ("reboots_lost", reboot_done)):
            try:
                wait_for(done, 60, f"{what}: carried out by the new home")
                facts[what] = 0
            except AssertionError:
                facts[what] = 1
        moved_at = ha.utc_now()
        mark = pathlib.Path(cloud.stack.workdir, "ironic.log").stat().st_size
    finally:
        try:
            flushes = flushing.stop(at_least=3)
        finally:
            hidden = time.monotonic() - paused_for if hidden_by else 0
            if hidden_by:
                hidden_by[victim].write_text(f"{hidden:.3f}")
            service.signal(signal.SIGCONT)
    resumed_at = time.time()
    resumed_log = len(made.since(victim))
    # its clocks read resumed_at - hidden now: its log's times and its events' too
    wait_for(lambda: ha.ring_logged(made, victim, resumed_at - hidden),
             ha.LEASE + 3 * ha.PERIODIC, "the resumed service a ring member again")
    time.sleep(2 * ha.PERIODIC)  # its periodics run, its queued requests are taken
    # Its own events since the move: a queued RPC records its attempt before anything
    # else (nova's wrap_instance_event); one that did nothing ends in Error, one that
    # acted, otherwise.  Its clocks set back by a hidden pause stamp them from the
    # moment it was paused on.
    own = [result for s in theirs if cloud.nova.server(s)
           for _, _, host, at, result in cloud.nova.events(s)
           if host == victim and after(at, paused_at if hidden_by else moved_at)]
    after_resume = made.since(victim)[resumed_log:]
    facts.update({
        # Requests that change a node, on the moved servers' nodes, once it resumed.
        "ironic_writes_on_moved": ironic_writes(cloud, mark, [servers[s] for s in theirs]),
        "actions_on_moved": sum(result != "Error" for result in own),
        "attempts_refused": sum(result == "Error" for result in own),
        "refused_logged": made.since(victim).count("refused to "),
        # nova's teardown of a server on the resumed service ("Terminating instance",
        # INFO, at the start of _shutdown_instance): after it nova deallocates the
        # server's network, whether the driver's destroy worked or failed.
        "ports_deallocated_on_moved": sum(
            ("Terminating instance" in line or "Deallocating network for instance" in line)
            and any(s in line for s in theirs) for line in after_resume.splitlines()),
        "moves_per_server_max": max((rehomes_of(cloud, s, paused_at) for s in theirs
                                     if cloud.nova.server(s)), default=0),
        "backend_flushes": flushes})
    moved()  # and where they are now, after its periodics
    facts["hosts_seen_max"] = max(len(seen[s] - {victim, None}) for s in theirs)
    left = [s for s in theirs if cloud.nova.server(s)]
    operable = [cloud.nova.operable(s, timeout=60) for s in left]
    facts["servers_operable"] = [sum(operable), len(left)]
    for server in theirs:
        cloud.nova.delete(server)
        cloud.nova.wait_gone(server)
        del servers[server]
    facts["deleted"] = len(theirs)
    return facts


def killed_during_deploy(cloud, made):
    """A service killed while it deploys a server (nova's task state ``spawning``): once
    it is fenced the server is re-homed and ends in ERROR with a fault saying why, as
    nova's _init_instance ends a build its service died in (never BUILD for ever: nova's
    instance_build_timeout is 0 by default); deleted through its new home, its node is
    cleaned.  Then the service comes back."""
    server, node, victim, staged = deploying(cloud, made, "ha-deploying")
    facts = {"host": victim, "staged": staged}
    made.kill(cloud.stack, victim)
    found = out_of_build(cloud, server)
    facts.update(status=found["status"], moved_to=found["OS-EXT-SRV-ATTR:host"],
                 fault=(found.get("fault") or {}).get("message", ""),
                 builds_stuck=int(found["status"] == "BUILD"))
    ha.restart(cloud, made, victim)
    facts["node_cleaned"] = deleted_and_freed(cloud, made, server, node)
    return facts


def deploying(cloud, made, name):
    """A server booted on a free node and caught deploying (nova's ``spawning``):
    (server, node, the node's service, whether it was still building when caught)."""
    node, victim = a_free_node(cloud, made)
    server = cloud.nova.boot(name, made.flavor, host=victim, node=node)
    seen = wait_until(lambda: cloud.nova.server(server), lambda found: (
        found["OS-EXT-STS:task_state"] == "spawning" or found["status"] != "BUILD"), 120,
        "the server spawning", interval=0.1)
    return server, node, victim, seen["status"] == "BUILD"


# A build held right after its VIFs were attached (the test hook, ``hooks``), the step
# nova's unconditional save follows: long enough for the move of its server.
AFTER_VIFS = "vifs"
VIFS_HOLD = FENCED_AFTER_KILL + 3 * ha.PERIODIC + 90


def held_after_its_vifs(cloud, made, name, hold=VIFS_HOLD, env=None):
    """``deploying``, with every service restarted with the test hook's hold after a
    build's VIFs (``hold`` s; over ``env``: host -> its environment), the server caught
    there: its service logged the hold (the caller restarts the fleet without the hook
    afterwards)."""
    restarted_with(cloud, made, lambda host: {**(env(host) if env else {}),
                                              HOOK: f"{AFTER_VIFS}={hold}"})
    node, victim = a_free_node(cloud, made)
    server = cloud.nova.boot(name, made.flavor, host=victim, node=node)
    wait_for(lambda: f"after the build's step '{AFTER_VIFS}'" in made.since(victim), 180,
             f"{server}'s build held after its VIFs on {victim}")
    return server, node, victim, True


def out_of_build(cloud, server):
    """The server once out of BUILD (a kill's fence and a move later), or as it is then."""
    try:
        return wait_until(lambda: cloud.nova.server(server),
                          lambda found: found["status"] != "BUILD",
                          FENCED_AFTER_KILL + 3 * ha.PERIODIC + 60, "the server out of BUILD")
    except AssertionError:
        return cloud.nova.server(server)


def offered_again(cloud, made, node, timeout):
    """Whether nova's scheduler is offered ``node`` again within ``timeout`` seconds."""
    try:
        wait_for(lambda: node in cloud.offered(made), timeout, f"node {node} offered again")
        return True
    except AssertionError:
        return False


def a_free_node(cloud, made):
    """(a node offered to nova's scheduler, the service whose node it is): its compute
    node record that service's, and the service managing it now by its own log.  A node
    just released to a member that came back keeps its record on the one that released
    it until the new owner's periodic, and a build sent there fails ("Attempt to claim
    resources ... on unknown node"): once in a whole CI run, after a story's restart."""
    def found():
        for node in sorted(cloud.offered(made)):
            home = cloud.home(node)
            if home in made.hosts and node in ha.managed_now(made, home):
                return node, home
        return None
    return wait_until(found, bool, 3 * ha.PERIODIC + 30, "a free node its service manages")


def deleted_and_freed(cloud, made, server, node, timeout=60):
    """Delete the server through nova's API: whether its node is then freed in Ironic."""
    cloud.nova.delete(server)
    cloud.nova.wait_gone(server)
    try:
        wait_for(lambda: made.ironic.get(node)["instance_uuid"] is None, timeout,
                 "the errored server's node freed")
        return True
    except AssertionError:
        return False


def paused_during_deploy(cloud, made, hidden_by=None, caught=None):
    """A service paused (SIGSTOP) while it deploys a server (nova's task state
    ``spawning``), past its lease and nova's service_down_time: the server is re-homed
    and ends in ERROR, as in ``killed_during_deploy``.  Then it resumes (SIGCONT) with
    the deploy's thread in flight: it must fence itself (restart in place) before that
    thread writes, so the server keeps its new home (nova's build-failure handler on the
    resumed service would clear its host and node and deallocate its ports), and its
    delete through the new home frees the node in Ironic (the node the resumed service
    would otherwise have left deployed, owned by nothing).  ``hidden_by``: {host: its
    clock shim's offset file}, to hide the pause from the service's clocks; ``caught``:
    how the build is caught (``deploying``, or ``held_after_its_vifs``)."""
    server, node, victim, staged = (caught or deploying)(cloud, made, "ha-paused-deploying")
    service = cloud.stack.service(f"nova-compute-{victim}")
    service.signal(signal.SIGSTOP)
    paused_at = time.monotonic()
    facts = {"host": victim, "staged": staged}
    try:
        found = out_of_build(cloud, server)
    finally:
        resumed_at = time.time()
        hidden = time.monotonic() - paused_at if hidden_by else 0
        if hidden_by:
            hidden_by[victim].write_text(f"{hidden:.3f}")
        service.signal(signal.SIGCONT)
    moved_to = found["OS-EXT-SRV-ATTR:host"]
    facts.update(status=found["status"], moved_to=moved_to,
                 fault=(found.get("fault") or {}).get("message", ""))
    try:
        # its clocks read resumed_at - hidden now, its log's times too
        wait_for(lambda: ha.ring_logged(made, victim, resumed_at - hidden),
                 ha.LEASE + 3 * ha.PERIODIC + 60, "the resumed service a ring member again")
    except AssertionError:
        facts["rejoined"] = False
    time.sleep(2 * ha.PERIODIC)  # what its threads in flight would do, done by now
    after = cloud.nova.server(server) or {}
    facts.update(self_fenced=made.since(victim).count("self-fenced: "),
                 host_after_resume=after.get("OS-EXT-SRV-ATTR:host"),
                 node_after_resume=after.get("OS-EXT-SRV-ATTR:hypervisor_hostname"),
                 status_after_resume=after.get("status"))
    facts["node_freed"] = deleted_and_freed(cloud, made, server, node, timeout=120)
    facts["node_state"] = made.ironic.get(node)["provision_state"]
    facts["node_offered"] = offered_again(cloud, made, node, 3 * ha.PERIODIC + 60)
    facts["spawns_lost"] = int(
        moved_to in (None, victim) or facts["host_after_resume"] != moved_to
        or not facts["node_freed"] or not facts["node_offered"])
    return facts


def cut_during_deploy(cloud, made):
    """A service cut off from the coordination backend and from its cell's bus (so from
    nova-conductor, its own record included) while it deploys a server, and kept cut
    past the move: the survivors fence it (its lease ended, its reports stopped) and
    re-home the server (ERROR on its new home, its allocation, VIFs and node kept).  Its
    deploy's thread goes on meanwhile, with Ironic, neutron and Placement still in
    reach: after the lapse of its lease it cannot read its own record, and unknown is
    stop: it restarts before it writes (it once logged that and went on, and its
    build-failure path detached the node's VIFs, deleted the ports and gave back the
    allocation of a server homed elsewhere).  Healed, it comes back.  The build is
    held after its VIFs (the test hook) when the cut comes: cut once nova's task state
    read ``spawning``, a fake deploy had sometimes ended ACTIVE before the cut bit."""
    server, node, victim, staged = held_after_its_vifs(cloud, made, "ha-cut-deploying")
    facts = {"host": victim, "staged": staged}
    made.cut_backend(victim)
    made.bus_proxies[victim].cut = True
    try:
        found = out_of_build(cloud, server)
        facts.update(status=found["status"], moved_to=found["OS-EXT-SRV-ATTR:host"])
        before = {"vifs": made.ironic.vifs(node), "node_state": made.ironic.get(node)[
            "provision_state"], "allocation": bool(cloud.placement.allocations(server))}
        # The hold ends, then its conductor calls time out (nova's rpc_response_timeout,
        # 60 s: the self-fence's read of its record), then its threads act on what they
        # were told, or stop: kept cut until it restarted, or long past that.
        seen_within(lambda: made.since(victim).count("self-fenced: ") >= 1,
                    VIFS_HOLD + 4 * 60)
        time.sleep(2 * ha.PERIODIC)
        after = cloud.nova.server(server) or {}
        facts.update(
            vifs_before=len(before["vifs"]), vifs_after=len(made.ironic.vifs(node)),
            allocation_kept=before["allocation"] and bool(cloud.placement.allocations(server)),
            host_after=after.get("OS-EXT-SRV-ATTR:host"),
            node_state_before=before["node_state"],
            node_state_after=made.ironic.get(node)["provision_state"],
            self_fenced=made.since(victim).count("self-fenced: "))
    finally:
        made.heal_backend(victim)
        made.bus_proxies[victim].heal()
    facts["writes_while_record_unread"] = (
        int(facts["vifs_after"] < facts["vifs_before"]) + int(not facts["allocation_kept"])
        + int(facts["host_after"] != facts["moved_to"])
        + int(facts["node_state_after"] != facts["node_state_before"]))
    restarted_with(cloud, made, None)  # the hook off, every service
    facts["node_freed"] = deleted_and_freed(cloud, made, server, node, timeout=120)
    return facts


def paused_after_its_vifs(cloud, made, servers=None):
    """A build paused (SIGSTOP) right after its last VIF attach, past the move of its
    server, then resumed: nova's next write saves the instance with no expected task
    state (its block-device step), and once put the moved server back in BUILD on its
    new home.  The service must stop first (the self-fence at the end of the driver's
    network step): the server stays in ERROR on its new home, and its delete frees the
    node."""
    try:
        # held just long enough to be paused there: the hold is over at the resume
        facts = paused_during_deploy(cloud, made, caught=functools.partial(
            held_after_its_vifs, hold=2 * SLACK))
    finally:
        restarted_with(cloud, made, None)
    facts["builds_stuck_after_pause"] = int(
        facts["status_after_resume"] != "ERROR" or bool(facts["spawns_lost"]))
    return facts


def with_hidden_pauses(cloud, made, story):
    """``story(offsets, env)`` with every service on the stack's clock shim
    (tools/localstack/clock_shim), each reading its offset from its file in ``offsets``
    ({host: path}): a story sets the paused one's clocks back by the pause at resume,
    realtime and monotonic both, as a VM pause hides itself from the guest (its
    monotonic clock stops too).  Its lease then shows no lapse until its next renewal
    learns from the backend that it was dropped; its threads act before that, and must
    still stop first (a write asks the backend).  ``env``: host -> the shim's
    environment, for a story that restarts the fleet with more."""
    offsets = {h: pathlib.Path(cloud.stack.workdir, f"clock-offset-{h}") for h in made.hosts}
    for offset in offsets.values():
        offset.write_text("0")

    def env(host):
        return {"PYTHONPATH": nova.CLOCK_SHIM, "RP_TEST_CLOCK_OFFSET_FILE": str(offsets[host])}
    restarted_with(cloud, made, env)
    try:
        return story(offsets, env)
    finally:
        restarted_with(cloud, made, None)


def hidden_pause_of_a_mover(cloud, made, servers):
    """``mover_paused`` with the pause hidden from the mover's clocks: its hook's sleep
    (the kernel's clock) is over at the resume, and its lease shows no lapse until its
    renewal asks the backend.  On the code before the fix it passed too: that renewal's
    next heartbeat learned the lease was gone and restarted the service ahead of the
    move's next write, so this story does not show the fix (test_self_fence.py does)."""
    return with_hidden_pauses(cloud, made, lambda offsets, env: mover_paused(
        cloud, made, servers, hidden_by=offsets, env=env))


def hidden_pause_of_a_delete(cloud, made, servers):
    """``pause_and_resume`` (a reboot and a delete asked of a paused service, carried out
    by the new homes; nothing done by it on the moved servers once it resumes) with the
    pause hidden from the service's clocks."""
    facts = with_hidden_pauses(
        cloud, made, lambda offsets, env: pause_and_resume(cloud, made, servers, offsets))
    facts["hidden_pause_losses"] = (
        facts["deletes_lost"] + facts["reboots_lost"] + facts["actions_on_moved"]
        + facts["ironic_writes_on_moved"] + facts["ports_deallocated_on_moved"]
        + (facts["hosts_seen_max"] > 1)
        + (facts["servers_operable"][0] != facts["servers_operable"][1]))
    return facts


def hidden_pause_during_deploy(cloud, made):
    """``paused_during_deploy`` with the pause hidden from the service's clocks, as a VM
    pause hides itself from the guest (its monotonic clock stops too): every service
    runs with the stack's clock shim (tools/localstack/clock_shim), and at resume the
    paused one's clocks are set back by the pause, realtime and monotonic both.  Its
    lease then shows no lapse until its next renewal learns from the backend that it was
    dropped; the deploy's thread acts before that, and must still stop first (a write
    asks the backend)."""
    # Held right after its VIFs, only as long as it takes to pause it there: at the
    # resume the hold is over (its sleep's end passed), and the build's next step is a
    # write (nova's save), the moment the service's own clock tells it nothing.
    facts = with_hidden_pauses(cloud, made, lambda offsets, env: paused_during_deploy(
        cloud, made, hidden_by=offsets, caught=functools.partial(
            held_after_its_vifs, hold=2 * SLACK, env=env)))
    # nova's save put the moved server back in BUILD, or its home or node was lost
    facts["hidden_pause_losses"] = int(bool(facts.pop("spawns_lost"))
                                       or facts["status_after_resume"] != "ERROR")
    return facts


def build_queued_to_the_dead(cloud, made):
    """A build cast to a service that dies before it takes it: the service is paused
    (SIGSTOP; nova still sees it up, so the scheduler books its node and casts the build
    to it), then killed.  nova's start-up would end such a build; the survivor that takes
    the node over ends it once the service is fenced: ERROR with a fault, its allocation
    given back, the node offered again.  The service then comes back and finds the
    build's message in its queue: it drops it (the server stays in ERROR, its node is
    never deployed)."""
    node, victim = a_free_node(cloud, made)
    service = cloud.stack.service(f"nova-compute-{victim}")
    service.signal(signal.SIGSTOP)
    try:
        server = cloud.nova.boot("ha-queued", made.flavor, host=victim, node=node)
        wait_for(lambda: cloud.placement.allocations(server), 60,
                 "the build's allocation on the paused service's node")
    finally:
        made.kill(cloud.stack, victim)
    facts = {"host": victim}
    facts["status"] = out_of_build(cloud, server)["status"]
    facts["node_offered"] = offered_again(cloud, made, node, 3 * ha.PERIODIC + 30)
    # read once the node is offered: the survivor writes the fault after the server's
    # ERROR (its compare-and-swap first) and before it gives the allocation back
    found = cloud.nova.server(server)
    facts["fault"] = (found.get("fault") or {}).get("message", "")
    # read once the node is offered: the server goes to ERROR a moment before its
    # allocation is given back
    facts["allocations_left"] = len(cloud.placement.allocations(server) or {})
    ha.restart(cloud, made, victim)
    time.sleep(2 * ha.PERIODIC)  # its queue is read, its periodics run
    facts.update(status_after_return=cloud.nova.server(server)["status"],
                 node_instance_after_return=made.ironic.get(node)["instance_uuid"],
                 dropped_logged=made.since(victim).count("no longer building"))
    facts["queued_builds_stuck"] = int(
        facts["status"] != "ERROR" or facts["allocations_left"] > 0
        or not facts["node_offered"] or facts["status_after_return"] != "ERROR"
        or facts["node_instance_after_return"] is not None)
    cloud.nova.delete(server)
    cloud.nova.wait_gone(server)
    return facts


def anti_affinity(cloud, made):
    """``[rp_reporter] full_pass_every`` 10: after two quiet periodics, two servers booted
    into a hard anti-affinity group.  nova's group policy check on the compute asks the
    driver for its nodes (``_get_nodename``: ``get_available_nodes()[0]``): both must be
    ACTIVE, on different hosts, each built once (no reschedule).  One after the other:
    booted together, nova's scheduler may place both on one host before either is
    recorded there, and nova's late check then reschedules one (GroupAffinityViolation),
    stock nova alike."""
    time.sleep(2 * ha.PERIODIC + SLACK)
    group = cloud.nova.server_group("ha-anti-affinity", "anti-affinity")
    servers, built = [], []
    for i in (1, 2):
        servers.append(cloud.nova.boot(f"ha-anti-{i}", made.flavor, group=group))
        built.append(cloud.nova.wait_built(servers[-1]))
    facts = {"statuses": [b["status"] for b in built],
             "hosts": [b.get("OS-EXT-SRV-ATTR:host") for b in built],
             "attempts": [cloud.nova.attempts(s) for s in servers],
             "faults": [(b.get("fault") or {}).get("message", "")[:200] for b in built]}
    facts["failed"] = (sum(status != "ACTIVE" for status in facts["statuses"])
                       + sum(a != 1 for a in facts["attempts"]))
    return group_deleted(cloud, made, group, servers, facts)


def group_deleted(cloud, made, group, servers, facts):
    """The group's servers and the group deleted, every node offered again; ``facts``."""
    for server in servers:
        cloud.nova.delete(server)
    for server in servers:
        cloud.nova.wait_gone(server)
    cloud.nova.delete_server_group(group)
    wait_for(lambda: cloud.offered(made) == set(made.nodes), 3 * ha.PERIODIC + 60,
             "every node offered again")
    return facts


def anti_affinity_through_a_move(cloud, made):
    """Two servers of a hard anti-affinity group on two services, the first on a node
    that the ring gives to the second's service once the first is gone.  The first
    service killed, its server is not moved onto the second (nova's evacuate refuses that
    host too): it stays on the dead service, which restarts with it."""
    homes = {node: hosts[0] for node, hosts in cloud.homes(made.nodes).items()}
    offered = cloud.offered(made)
    victim, other, node = next(
        (a, b, n) for a in made.hosts for b in made.hosts if a != b for n in offered
        if homes[n] == a and rp_ring.Ring({h for h in made.hosts if h != a}).owner(n) == b)
    other_node = next(n for n in offered if homes[n] == other)
    group = cloud.nova.server_group("ha-anti-move", "anti-affinity")
    servers = [cloud.nova.boot("ha-anti-move-1", made.flavor, host=victim, node=node,
                               group=group),
               cloud.nova.boot("ha-anti-move-2", made.flavor, host=other, node=other_node,
                               group=group)]
    statuses = [cloud.nova.wait_built(server)["status"] for server in servers]
    made.kill(cloud.stack, victim)
    refused = f"not re-homed: server group {group} (anti-affinity"
    wait_for(lambda: refused in made.since(other), FENCED_AFTER_KILL + 3 * ha.PERIODIC + 30,
             f"{other} refusing to take {servers[0]}")
    time.sleep(ha.REPORT + SLACK)  # a round after the refusal: still not moved
    hosts = [host_of(cloud, server) for server in servers]
    ha.restart(cloud, made, victim)
    facts = {"statuses": statuses, "victim": victim, "hosts": hosts,
             "moved_onto_one_service": int(hosts[0] == hosts[1]),
             "operable_after_restart": cloud.nova.operable(servers[0], timeout=90)}
    return group_deleted(cloud, made, group, servers, facts)


def in_nova_logs(cloud, text):
    """How many times ``text`` is in the logs of every nova service."""
    return sum(path.read_text(errors="replace").count(text)
               for path in pathlib.Path(cloud.stack.workdir).glob("nova*.log"))


def notification_errors(cloud):
    """nova's "Failed to send state update notification" lines (a task state outside
    nova's enum fails the versioned payload)."""
    return in_nova_logs(cloud, "Failed to send state update notification")


def upcalls(cloud):
    """Calls of a compute service that needed the API database, which cell1's conductor
    has not (the stack runs nova's superconductor layout): each is logged by the stack's
    probe in the conductor (``tools/localstack/probes``), whoever made it and whatever
    it did with the error (nova's conductor logs it at DEBUG only, and a caller may
    reword it or log nothing)."""
    return in_nova_logs(cloud, UPCALL)


# A deliberate upcall, as a compute service makes one: nova's objects through its cell's
# conductor (nova-compute's own indirection), with the service's configuration.  A
# flavor lives in the API database.
STAGED_UPCALL = """
import sys
from nova import config, context, objects
from nova.conductor import rpcapi
from nova.objects import base
config.parse_args(["nova-compute", "--config-file", sys.argv[1]])
objects.register_all()
base.NovaObject.indirection_api = rpcapi.ConductorAPI()
try:
    objects.Flavor.get_by_name(context.get_admin_context(), "rp-reporter-staged-upcall")
except Exception as e:
    print(type(e).__name__, str(e).splitlines()[0] if str(e) else "")
"""


def staged_upcall(cloud, made):
    """One deliberate upcall from a compute service's configuration: the counter the
    stories read (``upcalls``) moves by exactly one, so its 0 after them means none."""
    before = upcalls(cloud)
    conf = pathlib.Path(nova.conf_dir(cloud.stack), f"compute-{made.hosts[0]}.conf")
    done = subprocess.run([sys.executable, "-c", STAGED_UPCALL, str(conf)],
                          capture_output=True, text=True, timeout=180, check=False)
    seen_within(lambda: upcalls(cloud) > before, 30)
    time.sleep(2)  # a second line, were one call counted twice, would be there by now
    return {"counted": upcalls(cloud) - before, "caller_saw": done.stdout.strip()[-300:],
            "exit": done.returncode}


def host_of(cloud, server):
    """The server's compute service, or None once it is gone."""
    found = cloud.nova.server(server)
    return found and found["OS-EXT-SRV-ATTR:host"]


def placed_node(cloud, made, server):
    return cloud.nova.server(server)["OS-EXT-SRV-ATTR:hypervisor_hostname"]


def failing_one_node(cloud, node):
    """A proxy in front of Ironic answering 500 to every read of ``node`` (nova's client
    retries a 503 for minutes, not a 500) while ``.answer`` is set."""
    proxy = Proxy(cloud.stack.ironic_url)
    proxy.links_to_self = True
    proxy.answer = lambda method, path: (
        (500, b"Internal Server Error") if method == "GET"
        and path.startswith(f"/v1/nodes/{node}") else None)
    return proxy


def replacement_host(cloud, made, servers):
    """Every member killed, then a service started under a new host name with the same
    configuration (an operator's replacement): it starts (nova creates its Service record
    after init_host; a move before that failed the start), takes the free nodes and the
    servers, strands nothing, and survives a restart.  Its Ironic answers 500 for one
    server's node at first: that node's move fails and is logged, the others move, and
    it moves once Ironic answers again."""
    for host in made.hosts:  # a server on each, so each death leaves one to move
        node = next((n for n in cloud.offered(made) if cloud.home(n) == host), None)
        if node and not any(cloud.nova.server(s)["OS-EXT-SRV-ATTR:host"] == host
                            for s in servers):
            server = cloud.nova.boot(f"ha-{host}-last", made.flavor, host=host, node=node)
            assert cloud.nova.wait_built(server)["status"] == "ACTIVE"
            servers[server] = node
    while len(servers) < 3:  # one rebooted, one deleted, one whose node Ironic fails
        node = sorted(cloud.offered(made))[0]  # the ring may leave a service no free node
        server = cloud.nova.boot(f"ha-extra-{len(servers)}", made.flavor,
                                 host=cloud.home(node), node=node)
        assert cloud.nova.wait_built(server)["status"] == "ACTIVE"
        servers[server] = node
    # In flight as they die: a reboot and a delete asked of two servers just before.
    rebooted, deleted = list(servers)[:2]
    cloud.nova.reboot(rebooted)
    cloud.nova.delete(deleted)
    killed_at = ha.utc_now()
    for host in made.hosts:
        made.kill(cloud.stack, host)
    new = f"{made.name}-new"
    failing = next(s for s in servers if s not in (rebooted, deleted))
    ironic = failing_one_node(cloud, servers[failing])
    made.sections[new] = json.loads(json.dumps(made.sections[made.hosts[0]]))
    made.sections[new].setdefault("ironic", {})["endpoint_override"] = ironic.url
    made.start(cloud.stack, new)
    facts = {"host": new, "servers": len(servers)}
    try:
        wait_for(lambda: cloud.nova.compute_up(new), 120, f"{new} up")
        failed_line = re.compile(rf"node {servers[failing]}: re-homing instance \S+ from "
                                 r"\S+ failed")
        wait_for(lambda: failed_line.search(made.since(new))
                 and all(host_of(cloud, s) in (new, None) for s in servers if s != failing),
                 FENCED_AFTER_KILL + 6 * ha.PERIODIC + 60,
                 f"{new} re-homing every server but the one whose node fails")
        facts["others_moved_while_one_node_failed"] = host_of(cloud, failing) != new
        ironic.answer = None
        wait_for(lambda: all(host_of(cloud, s) in (new, None) and cloud.home(n) == new
                             for s, n in servers.items())
                 and all(h == [new] for h in cloud.homes(made.nodes).values()),
                 FENCED_AFTER_KILL + 6 * ha.PERIODIC + 60,
                 f"{new} holding every node and server")
        time.sleep(ha.PERIODIC)  # the re-homing plus one periodic
        facts["stuck_task_states"] = sum(
            bool(found and found["OS-EXT-STS:task_state"])
            for found in map(cloud.nova.server, servers))
        for server in [s for s in servers if cloud.nova.server(s) is None]:
            del servers[server]  # the delete finished before its service died
        facts["in_flight_deleted"] = deleted not in servers
        restarted = ha.utc_now()
        made.start(cloud.stack, new)
        wait_for(lambda: cloud.nova.compute_up(new, since=restarted), 120,
                 f"{new} up after a restart")
        facts["servers_operable"] = [sum(cloud.nova.operable(s, timeout=60) for s in servers),
                                     len(servers)]
        facts["ok"] = facts["servers_operable"][0] == len(servers)
    except AssertionError as e:
        facts.update(ok=False, why=str(e)[:300])
    facts["stranded"] = sum(host_of(cloud, s) not in (new, None) for s in servers)
    facts["moves_per_server_max"] = max((rehomes_of(cloud, s, killed_at) for s in servers),
                                        default=0)
    return facts


# -- the promises ------------------------------------------------------------------

@pytest.mark.every_release
def test_free_nodes_of_a_killed_service_become_schedulable_through_a_survivor(ours):
    """Item 1: within one lease plus one resource-tracker run, and a server boots.  A
    survivor claims at its next run, which starts up to one interval after its last
    one ended (nova's periodic loop runs the other periodic tasks too), and the run
    itself takes a few seconds here: the bound is the lease and two intervals (and
    nova's calls to its conductor, where each waits 0.5 s steps: ha.RPC_SLACK)."""
    assert ours["kill_to_free_schedulable_s"] <= ha.LEASE + 2 * ha.PERIODIC + ha.RPC_SLACK, ours
    assert ours["booted_on_free"] == "ACTIVE"


@pytest.mark.every_release
def test_its_servers_are_rehomed_once_it_is_fenced(ours):
    """Item 2: moved by a survivor after the fence, by its re-homing job (every
    report_interval, after watching the dead service's reports stall for
    service_down_time): bounded by two resource-tracker intervals (and nova's calls
    to its conductor, where each waits 0.5 s steps: ha.RPC_SLACK)."""
    assert ours["fence_to_rehomed_s"] is not None
    assert 0 <= ours["rehomed_after_fence_logged_s"], ours
    assert ours["fence_to_rehomed_s"] <= 2 * ha.PERIODIC + ha.RPC_SLACK, ours


@pytest.mark.every_release
def test_every_server_of_the_dead_service_can_be_rebooted_and_deleted(ours):
    """Item 3."""
    operable, of = ours["servers_operable_after"]
    assert of >= 1 and operable == of, ours["servers_operable_after"]


def test_a_returning_service_takes_back_only_what_the_ring_gives_it(ours):
    """Item 4: never a node whose instance is homed elsewhere; two managers for one
    node no longer than one lease; every server still served."""
    assert ours["taken_back_with_instance_elsewhere"] == []
    assert all(len(hosts) == 1 for hosts in ours["homes_after_return"].values())
    assert ours["double_claimed_max_s"] <= ha.LEASE, ours["double_claimed_max_s"]
    operable, of = ours["servers_operable_after_return"]
    assert operable == of, ours["servers_operable_after_return"]


@pytest.mark.every_release
def test_nothing_deleted_duplicated_or_lost(ours):
    """Item 5, and nova bugs 1853009 and 1839560 (a rebalance deleting compute node
    records and providers; a node in maintenance during one made unusable): both
    scenarios ran (the kill, the return, the partition; a node in maintenance moved
    and offered again afterwards)."""
    assert (ours["records_deleted"], ours["providers_deleted"], ours["allocations_lost"],
            ours["records_duplicated"]) == (0, 0, 0, 0), ours


def test_a_partitioned_service_stops_claiming_and_nothing_is_rehomed(ours):
    """Item 5: coordination unreachable, nova still sees it up."""
    cut = ours["partition"]
    assert cut["nova_saw_it_up"] and cut["servers_moved"] == 0, cut
    assert cut["servers_operable"][0] == cut["servers_operable"][1], cut
    assert cut["free_nodes"] == 0 or cut["free_taken_over_s"] <= (
        ha.LEASE + 2 * ha.PERIODIC + SLACK), cut


def test_a_mover_killed_half_way_is_finished_by_the_next_owner(ours):
    """Item 2's resumption: the steps are found again from the fenced services."""
    assert ours["mover"]["resumed"], ours["mover"]


@pytest.mark.every_instant
def test_a_mover_killed_after_each_step_of_a_move_is_finished_by_the_next_owner(ours):
    """A mover killed right after each step of a move (the fence, the claim, the host,
    the action, the compute node record): the next owner finishes every one."""
    steps = [mover["step"] for mover in ours["movers"]]
    assert sorted(steps) == sorted(hooks.PAUSE_POINTS), steps
    assert ours["moves_left_unfinished"] == 0, ours["movers"]


@pytest.mark.every_instant
def test_a_service_forced_down_as_it_rejoins_clears_the_flag_within_a_lease(ours):
    rejoin = ours["rejoin"]
    assert rejoin["forced_down_seen"] and rejoin["stuck_forced_down"] == 0, rejoin
    assert rejoin["server_stayed"], rejoin


@pytest.mark.every_instant
def test_a_service_held_for_an_upgrade_keeps_its_servers_through_its_restart(ours):
    held = ours["held"]
    assert held["fenced_or_moved_while_held"] == 0 and held["server_stayed"], held
    assert held["operable_after"], held


@pytest.mark.every_instant
@pytest.mark.parametrize("fault", HOLD_FAULTS)
def test_a_hold_survives_a_movers_clock_step_and_a_flushed_backend(ours, fault):
    held = ours.get(f"held_{fault}") or next(  # its story alone (--ha-stories), or all
        f for f in ours["held_faults"] if f["fault"] == fault)
    assert held["fenced_or_moved_while_held"] == 0 and held["server_stayed"], held
    assert held["operable_after"], held


@pytest.mark.every_instant
@pytest.mark.parametrize("how", list(OPERATOR_FLAGS))
def test_an_operators_flag_is_kept_through_a_movers_cycle(ours, how):
    flag = ours.get(f"operator_{how}") or next(  # its story alone (--ha-stories), or all
        f for f in ours["operator_flags"] if f["how"] == how)
    assert flag["operator_flag_kept"] and flag["operator_flags_cleared"] == 0, flag


@pytest.mark.every_instant
@pytest.mark.parametrize("story", ["stale_mover", "stale_mover_hidden"])
def test_a_mover_that_resumes_after_it_was_fenced_writes_nothing(ours, story):
    stale = ours[story]
    assert stale["finished"] and stale["self_fenced"] >= 1, stale
    assert stale["stale_mover_writes"] == 0, stale


@pytest.mark.every_instant
def test_a_service_cut_off_in_a_deploy_writes_nothing_once_it_cannot_read_its_record(ours):
    cut = ours["cut_deploy"]
    assert cut["status"] == "ERROR" and cut["moved_to"] not in (None, cut["host"]), cut
    assert cut["self_fenced"] >= 1 and cut["writes_while_record_unread"] == 0, cut
    assert cut["node_freed"], cut


@pytest.mark.every_instant
def test_a_build_paused_after_its_vifs_ends_in_error_on_its_new_home(ours):
    paused = ours["paused_after_vifs"]
    assert paused["staged"] and paused["self_fenced"] >= 1, paused
    assert paused["moved_to"] not in (None, paused["host"]), paused
    assert paused["builds_stuck_after_pause"] == 0, paused


@pytest.mark.every_instant
def test_a_deploy_paused_with_the_pause_hidden_from_its_clocks_stops_before_it_writes(ours):
    hidden = ours["hidden_pause"]
    assert hidden["staged"] and hidden["self_fenced"] >= 1, hidden
    assert hidden["hidden_pause_losses"] == 0, hidden


@pytest.mark.every_instant
def test_a_delete_asked_of_a_service_paused_with_the_pause_hidden_is_carried_out(ours):
    hidden = ours["hidden_pause_delete"]
    assert hidden["deletes_lost"] == 0 and hidden["reboots_lost"] == 0, hidden
    assert hidden["hidden_pause_losses"] == 0, hidden


@pytest.mark.every_instant
def test_a_node_left_deployed_by_a_local_delete_is_found_and_undeployed(ours):
    orphan = ours["orphan"]
    assert orphan["left_deployed"], orphan  # nova's local delete, as stock nova does
    assert orphan["orphaned_nodes_found"] == 1 and orphan["said"] == 1, orphan
    assert orphan["node_offered"] and orphan["kept_server_deployed"], orphan


@pytest.mark.every_instant
def test_a_queued_build_is_ended_past_its_survivors_restart(ours):
    queued = ours["queued_restart"]
    assert queued["queued_builds_stranded"] == 0, queued


def test_a_paused_service_that_resumes_acts_on_none_of_its_moved_servers(ours):
    """A paused service resumes after its servers moved: it acts on none of them."""
    paused = ours["pause"]
    assert paused["ironic_writes_on_moved"] == 0 and paused["actions_on_moved"] == 0, paused
    assert paused["servers_operable"][0] == paused["servers_operable"][1], paused


def test_survivors_whose_views_disagree_move_each_server_once(ours):
    """The moves above ran while the coordination backend lost its data every 2 s
    (members and the nodes' locks gone, each survivor joining again on its own): each
    server moved once (one instance action), and never seen on two hosts."""
    paused = ours["pause"]
    assert paused["backend_flushes"] >= 3, paused
    assert paused["moves_per_server_max"] == 1, paused
    assert paused["hosts_seen_max"] == 1, paused


def test_a_replacement_host_starts_takes_everything_and_survives_a_restart(ours):
    """A new host after every member died."""
    new = ours["replacement"]
    assert new["ok"] and new["stranded"] == 0, new
    # A reboot and a delete in flight when every service died: no task state stuck once
    # the servers are re-homed and a periodic has run; each server operable (or deleted).
    assert new["stuck_task_states"] == 0, new
    assert new["moves_per_server_max"] == 1, new


def test_an_ironic_error_for_one_node_leaves_the_others_moving(ours):
    """While the replacement's Ironic answered 500 for one server's node: that move
    failed and was logged, every other server moved in the same rounds, and the failed
    one moved once Ironic answered (the replacement holds every server, above)."""
    new = ours["replacement"]
    assert new["others_moved_while_one_node_failed"] is True, new
    assert new["ok"], new


@pytest.mark.reference
def test_stock_nova_leaves_the_dead_services_servers_stuck(stock, ours):
    """The reference, side by side: nova's ring moves the free nodes, but the servers
    of a dead service cannot be rebooted until it comes back (what the README says)."""
    assert stock["servers_operable_after"][0] == 0 < stock["servers_operable_after"][1]
    assert stock["fence_to_rehomed_s"] is None
    operable, of = stock["servers_operable_after_return"]
    assert operable == of, stock["servers_operable_after_return"]


def test_a_delete_asked_of_a_paused_service_is_carried_out_by_its_new_home(ours):
    """nova's _init_instance restarts a delete its service did not finish; a move does
    the same: the server deleted, its node cleaned, and the resumed service deallocates
    no port of any server it no longer holds."""
    paused = ours["pause"]
    assert paused["deletes_lost"] == 0, paused
    assert paused["ports_deallocated_on_moved"] == 0, paused


def test_a_reboot_asked_of_a_paused_service_is_carried_out_by_its_new_home(ours):
    paused = ours["pause"]
    assert paused["reboots_lost"] == 0, paused


def test_a_service_killed_during_a_deploy_leaves_the_server_in_error_with_a_fault(ours):
    deploy = ours["deploy"]
    assert deploy["staged"], deploy  # killed while the server was still building
    assert deploy["builds_stuck"] == 0 and deploy["status"] == "ERROR", deploy
    assert "fenced during the build" in deploy["fault"], deploy
    assert deploy["moved_to"] != deploy["host"] and deploy["node_cleaned"], deploy


def test_a_service_paused_during_a_deploy_fences_itself_when_it_resumes(ours):
    """Self-fencing: the resumed service restarts before its deploy's thread writes;
    the server keeps its new home (in ERROR, as a build whose service died), and its
    delete frees the node in Ironic."""
    paused = ours["paused_deploy"]
    assert paused["staged"] and paused["status"] == "ERROR", paused
    assert paused["self_fenced"] >= 1, paused
    assert paused["spawns_lost"] == 0, paused


def test_a_build_queued_to_a_service_that_died_ends_in_error_and_frees_its_node(ours):
    """As nova's start-up ends it, by the survivor that took the node over: ERROR with a
    fault, no allocation left, the node offered again; the service back drops it."""
    queued = ours["queued"]
    assert queued["status"] == "ERROR" and "which was fenced" in queued["fault"], queued
    assert queued["queued_builds_stuck"] == 0, queued


def test_a_service_of_no_group_down_in_the_same_cell_is_never_forced_down(stock, ours):
    """The stock services, down for the whole of ours' stories, one with a server on an
    Ironic node: ours fenced none of them."""
    assert ours["foreign_services_forced_down"] == 0, ours["foreign_services_forced_down"]


def test_an_anti_affinity_group_boots_after_quiet_periodics(ours):
    """full_pass_every 10: nova's group policy check reads the driver's nodes."""
    anti = ours["anti_affinity"]
    assert anti["failed"] == 0 and anti["statuses"] == ["ACTIVE", "ACTIVE"], anti
    assert len(set(anti["hosts"])) == 2, anti


@pytest.mark.every_instant
def test_two_anti_affinity_members_are_never_moved_onto_one_service(ours):
    """nova's evacuate check, kept by a move in the superconductor layout (no upcall):
    the killed service's member stays where it is, and is operable once it is back."""
    moved = ours["anti_affinity"]["move"]
    assert moved["statuses"] == ["ACTIVE", "ACTIVE"], moved
    assert moved["hosts"][0] == moved["victim"] and moved["moved_onto_one_service"] == 0, moved
    assert moved["operable_after_restart"], moved


def test_moves_send_nova_s_versioned_notifications_without_an_error(ours):
    """Every move above ran with versioned notifications on every state change."""
    assert ours["notification_errors"] == 0, ours["notification_errors"]


def test_no_compute_service_reaches_for_the_api_database(ours):
    """In nova's superconductor layout (the stack's) every story above ran with no call
    of a compute service's needing the API database: the group's record is in the
    coordination backend."""
    assert ours["upcalls"] == 0, ours["upcalls"]


def test_the_upcall_counter_counts_a_staged_upcall(ours):
    """The counter behind upcalls == 0 moves for a deliberate upcall, once."""
    assert ours["staged_upcall"]["counted"] == 1, ours["staged_upcall"]


def test_a_service_holding_only_a_record_it_took_over_is_mapped_by_service_alone(cloud):
    """The operator guide's ``discover_hosts --by-service``, on nova's own driver: the
    record that got its first host mapped to the cell keeps its mark when a second
    service takes the node over, so discovery by compute node leaves that service
    unmapped and nova's API hides the node; discovery by service maps it.  One node on
    a shard of its own (nova's ring is then the service alone)."""
    stack, shard = cloud.stack, f"shard-mapping-{uuid.uuid4().hex[:6]}"
    first, second = (f"{shard}-{i}" for i in (1, 2))  # hosts no run has mapped
    ironic = clients.Ironic(stack.ironic_url, shard, auth=stack.admin_auth("baremetal"))
    node, = ironic.create_many(1, resource_class="baremetal-ha-mapping")

    def held_by(host):
        wait_until(lambda: cloud.records([node]), lambda found: found == {node: host},
                   180, f"{host} holding the node's compute node record")

    def mapped(host):
        return not nova.unmapped(stack, [host])
    try:
        stack.start_compute(first, "stock", shard, **ha.nova_sections())
        held_by(first)
        nova.manage(stack, "cell_v2", "discover_hosts")
        first_mapped = mapped(first)
        stack.service(f"nova-compute-{first}").stop()
        stack.start_compute(second, "stock", shard, **ha.nova_sections())
        held_by(second)
        nova.manage(stack, "cell_v2", "discover_hosts")
        by_node = mapped(second), cloud.homes([node])[node]
        nova.manage(stack, "cell_v2", "discover_hosts", "--by-service")
        by_service = mapped(second), cloud.homes([node])[node]
    finally:
        process.stop_all([stack.service(f"nova-compute-{host}") for host in (first, second)])
    assert first_mapped
    assert by_node == (False, []), by_node
    assert by_service == (True, [second]), by_service


# The stories ``--ha-stories`` can run alone: (cloud, made, servers) -> facts.
STORIES = {"stale_mover": mover_paused, "stale_mover_hidden": hidden_pause_of_a_mover,
           "queued_restart": queued_past_a_survivors_restart,
           "cut_deploy": lambda cloud, made, servers: cut_during_deploy(cloud, made),
           "staged_upcall": lambda cloud, made, servers: staged_upcall(cloud, made),
           "hidden_pause": lambda cloud, made, servers: hidden_pause_during_deploy(cloud, made),
           "hidden_pause_delete": hidden_pause_of_a_delete,
           **{f"held_{fault}": functools.partial(held_for_an_upgrade, fault=fault)
              for fault in HOLD_FAULTS},
           "orphan": deleted_while_down, "paused_after_vifs": paused_after_its_vifs,
           **{f"operator_{how}": functools.partial(operator_flag_kept, how=how)
              for how in OPERATOR_FLAGS}}
