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

"""What the churn measure counts for one topology (test_churn.py): every provider
write by anyone (the sum of its providers' generations), the agents' trait and
inventory writes and generation conflicts (their metrics), and nova-compute's ERROR
lines (its 409s on traits and inventory)."""

import threading
import time

from tools import clients

WARM_UP = 90  # s: the agents' first passes and nova's first cache refreshes, not counted


# What each count sums over the topology's agents: the sample's name in /metrics.
AGENT_COUNTS = {
    "agent_trait_writes": 'rp_reporter_placement_writes_total{kind="traits"}',
    "agent_inventory_writes": 'rp_reporter_placement_writes_total{kind="inventory"}',
    "agent_conflicts": "rp_reporter_generation_conflicts_total",
}


def snapshot(cloud, topology):
    samples = [clients.metrics(agent.port) for agent in topology.agents]
    return {
        "at": time.monotonic(),
        "provider_writes": sum(cloud.placement.provider(n)["generation"]
                               for n in topology.nodes),
        **{count: sum(s.get(sample, 0.0) for s in samples)
           for count, sample in AGENT_COUNTS.items()},
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
