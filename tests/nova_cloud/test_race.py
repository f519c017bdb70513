"""The scheduling race the project was started for (issue item 3), stock nova against
topologies A and C: the same script on each topology's own 8 nodes, one topology at
a time, nova as it ships (its 60 s periodic, its scheduler and filters).

* maintenance: 4 of the 8 nodes go into maintenance in Ironic; SETTLE later, 4
  servers are booted at once.  A build that nova sends to a node in maintenance is
  refused by nova's own driver ("Chosen ironic node ... is not available") and
  rescheduled, or fails once its attempts are spent.
* freed: all 8 nodes hold servers; 4 servers are deleted (Ironic cleans the nodes,
  automated cleaning is on) and SETTLE after the last node is usable again in Ironic
  4 servers are booted at once.  Reuse is the time from a node being usable in Ironic
  (available, no instance, not in maintenance) to nova's scheduler being offered it
  (in Placement's allocation candidates, with the traits nova asks for) or a new
  server holding it.

Double bookings (one single-unit provider allocated to two servers: Placement's own
race, not the scheduler's) are counted apart.  Targets with the agents: no failed or
rescheduled build, reuse p50 <= 1 s and max <= 5 s.  Stock nova's figures are
recorded, not judged: they are the reference.
"""

import concurrent.futures
import statistics
import threading
import time

import pytest

from tests.functional.agents import wait_for

SETTLE = 1.0  # seconds between the change in Ironic and the boots, for every topology
BOOTS = 4
REUSE_TIMEOUT = 150  # stock nova's periodic (60 s), twice, and some
PERIODIC_WAIT = 150


def boot_at_once(cloud, topology, count, prefix):
    """``count`` servers requested together; their ids."""
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda i: cloud.nova.boot(f"{prefix}-{i}", topology.flavor),
                             range(count)))


def outcome(cloud, servers):
    """(failed, rescheduled, {server: node}) once every server is built or failed."""
    built = {s: cloud.nova.wait_built(s, timeout=300) for s in servers}
    failed = sum(b["status"] == "ERROR" for b in built.values())
    rescheduled = sum(max(cloud.nova.attempts(s) - 1, 0) for s in servers)
    return failed, rescheduled, {s: b["OS-EXT-SRV-ATTR:hypervisor_hostname"]
                                 for s, b in built.items() if b["status"] == "ACTIVE"}


def delete_all(cloud, servers):
    for server in servers:
        cloud.nova.delete(server)
    for server in servers:
        cloud.nova.wait_gone(server)


def double_booked(cloud, topology):
    """Providers of the topology holding more than their one unit."""
    over = 0
    for node in topology.nodes:
        usages = cloud.placement._call("GET", f"/resource_providers/{node}/usages")["usages"]
        over += sum(used > 1 for used in usages.values())
    return over


def refusals(topology):
    return topology.compute_log_text().count("is not available")


def usable(node):
    return (node["provision_state"] == "available" and not node["maintenance"]
            and not node["instance_uuid"] and not node["target_provision_state"])


def maintenance_race(cloud, topology):
    wait_for(lambda: cloud.candidates(topology) == set(topology.nodes), PERIODIC_WAIT,
             f"{topology.name}: every node offered")
    refused_before = refusals(topology)
    bad = topology.nodes[:BOOTS]
    with concurrent.futures.ThreadPoolExecutor(len(bad)) as pool:
        list(pool.map(lambda n: topology.ironic.set_maintenance(n, True), bad))
    time.sleep(SETTLE)
    servers = boot_at_once(cloud, topology, BOOTS, f"race-maint-{topology.name}")
    failed, rescheduled, landed = outcome(cloud, servers)
    row = {"builds": BOOTS, "failed": failed, "rescheduled": rescheduled,
           "refused_by_driver": refusals(topology) - refused_before,
           "landed_in_maintenance": sum(node in bad for node in landed.values()),
           "double_booked": double_booked(cloud, topology)}
    delete_all(cloud, servers)
    for node in bad:
        topology.ironic.set_maintenance(node, False)
    return row


def freed_race(cloud, topology):
    wait_for(lambda: cloud.candidates(topology) == set(topology.nodes), PERIODIC_WAIT,
             f"{topology.name}: every node offered")
    refused_before = refusals(topology)
    fill = boot_at_once(cloud, topology, len(topology.nodes), f"race-fill-{topology.name}")
    failed_fill, _, landed = outcome(cloud, fill)
    assert failed_fill == 0, f"{topology.name}: filling the nodes failed {failed_fill} builds"
    freed_servers = fill[:BOOTS]
    freed = {landed[s] for s in freed_servers}
    for server in freed_servers:
        cloud.nova.delete(server)

    usable_at, offered_at, offered_early, new_servers = {}, {}, set(), []
    boot_started = False

    def boot_later():
        new_servers.extend(boot_at_once(cloud, topology, BOOTS, f"race-freed-{topology.name}"))

    deadline = time.monotonic() + REUSE_TIMEOUT
    while len(offered_at) < len(freed) and time.monotonic() < deadline:
        now = time.monotonic()
        for node in freed - set(usable_at):
            if usable(topology.ironic.get(node)):
                usable_at[node] = now
        offered = cloud.candidates(topology) & freed
        offered_early |= offered - set(usable_at)  # offered while Ironic would refuse it
        for server in list(new_servers):
            offered |= set(cloud.placement.allocations(server)) & freed
        for node in (offered & set(usable_at)) - set(offered_at):
            offered_at[node] = now
        if (not boot_started and len(usable_at) == len(freed)
                and now - max(usable_at.values()) >= SETTLE):
            threading.Thread(target=boot_later, daemon=True).start()
            boot_started = True
        time.sleep(0.05)
    wait_for(lambda: len(new_servers) == BOOTS, 60, "the new boots requested")
    failed, rescheduled, _ = outcome(cloud, new_servers)
    reuse = [offered_at.get(n, deadline) - usable_at.get(n, deadline) for n in freed]
    row = {"builds": BOOTS, "failed": failed, "rescheduled": rescheduled,
           "refused_by_driver": refusals(topology) - refused_before,
           "double_booked": double_booked(cloud, topology),
           "reuse_s": sorted(round(r, 3) for r in reuse),
           "reuse_s_p50": round(statistics.median(reuse), 3),
           "reuse_s_max": round(max(reuse), 3),
           "never_offered": len(freed) - len(offered_at),
           "offered_while_unusable": len(offered_early)}
    delete_all(cloud, fill[BOOTS:] + new_servers)
    return row


@pytest.mark.parametrize("name", ["stock", "A", "C"])
def test_race(cloud, name):
    topology = cloud.topologies[name]
    maintenance = maintenance_race(cloud, topology)
    freed = freed_race(cloud, topology)
    row = {"topology": name, "builds": maintenance["builds"] + freed["builds"],
           "failed": maintenance["failed"] + freed["failed"],
           "rescheduled": maintenance["rescheduled"] + freed["rescheduled"],
           "double_booked": maintenance["double_booked"] + freed["double_booked"],
           "reuse_s_p50": freed["reuse_s_p50"], "reuse_s_max": freed["reuse_s_max"],
           "maintenance": maintenance, "freed": freed}
    cloud.results.setdefault("race", []).append(row)
    print(f"\n{name}: {row}")
    assert maintenance["landed_in_maintenance"] == 0  # Ironic refuses, whoever reports
    if name == "stock":
        return  # the reference: recorded, not judged
    assert row["double_booked"] == 0, row
    assert maintenance["failed"] == 0 and maintenance["rescheduled"] == 0, maintenance
    assert freed["failed"] == 0 and freed["rescheduled"] == 0, freed
    assert freed["never_offered"] == 0 and freed["offered_while_unusable"] == 0, freed
    assert freed["reuse_s_p50"] <= 1.0 and freed["reuse_s_max"] <= 5.0, freed
