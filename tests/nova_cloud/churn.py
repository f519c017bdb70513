"""What the churn measure counts for one topology (test_churn.py): every provider
write by anyone (the sum of its providers' generations), the agents' trait and
inventory writes and generation conflicts (their metrics), and nova-compute's ERROR
lines (its 409s on traits and inventory)."""

import threading
import time

WARM_UP = 90  # s: the agents' first passes and nova's first cache refreshes, not counted


def snapshot(cloud, topology):
    agents = topology.agents
    return {
        "at": time.monotonic(),
        "provider_writes": sum(cloud.placement.provider(n)["generation"]
                               for n in topology.nodes),
        "agent_trait_writes": sum(a.metric("rp_reporter_placement_writes_total",
                                           '{kind="traits"}') for a in agents),
        "agent_inventory_writes": sum(a.metric("rp_reporter_placement_writes_total",
                                               '{kind="inventory"}') for a in agents),
        "agent_conflicts": sum(a.metric("rp_reporter_generation_conflicts_total")
                               for a in agents),
        "nova_error_lines": sum(" ERROR " in line
                                for line in topology.compute_log_text().splitlines()),
    }


def start_after_warm_up(cloud, names):
    """Take the start snapshots of these topologies WARM_UP seconds from now, in the
    background (the other tests run meanwhile); cloud.churn_start holds them."""
    def take():
        cloud.churn_start = {name: snapshot(cloud, cloud.topologies[name]) for name in names}
    timer = threading.Timer(WARM_UP, take)
    timer.daemon = True
    timer.start()
    return timer
