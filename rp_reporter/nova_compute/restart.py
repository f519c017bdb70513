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

"""A service's start with its compute node records in place, ``full_pass_every`` above 1.

nova's start (``ComputeManager.pre_start_hook``) runs its resource tracker's update over
every node the driver gives before the service takes a request, and a claim needs the
node in the resource tracker (``ComputeResourcesUnavailable`` otherwise).  At 1,000
nodes a service, that is minutes without a build taken at each restart, though a free
node whose record and provider are in place needs nothing of nova's look first: the
agents keep its provider.

So at the start, a free node (no server) whose compute node record is this host's is
taken up as nova's own update starts with it: under the resource tracker's lock, its
record (this host's records are read at once) goes into the resource tracker, and nova's
``_init_compute_node`` goes on from there.  The rest of nova's update of it (usage,
Placement, the record's fields) is left to the first periodic, where it is due as new
here.  A node with a server, a node new to this host and a node whose record another
host holds go through nova's start-up update as before.
"""

import logging

from nova import context as nova_context
from nova import exception
from nova import objects
from nova import utils as nova_utils
from nova.compute import resource_tracker
from oslo_config import cfg

LOG = logging.getLogger(__name__)


def records_here(manager, context):
    """{node: its compute node record} of this host's records."""
    try:
        records = objects.ComputeNodeList.get_all_by_host(context, manager.host)
    except exception.NotFound:  # nova's answer when the host has none yet
        return {}
    return {cn.hypervisor_hostname: cn for cn in records}


def take_up(manager, resources_of, nodes):
    """The nodes of ``nodes`` (free ones) whose compute node record is this host's, each
    put into nova's resource tracker as nova's update starts with it
    (``resources_of(node)``: the driver's resources of the node, nova's own answer)."""
    context = nova_context.get_admin_context()
    try:
        here = records_here(manager, context)
    except Exception:  # noqa: BLE001 - then nova's start-up update goes over every node
        LOG.exception("This host's compute node records could not be read: nova's "
                      "start-up update goes over every node")
        return []
    rt = manager.rt

    @nova_utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
    def init(record, resources):
        # The record as nova's _init_compute_node keeps one it read (here all of them in
        # one read, not one a node); nova's own code then takes it from there.
        added = rt.compute_nodes.setdefault(record.hypervisor_hostname, record) is record
        try:
            rt._init_compute_node(context, resources)
        except Exception:
            if added:  # as nova's own would leave it: not in the resource tracker
                rt.compute_nodes.pop(record.hypervisor_hostname, None)
            raise

    taken = []
    for node in nodes:
        record = here.get(node)
        if record is None or record.host != manager.host:
            continue
        resources = resources_of(node)
        # what nova's update sets before its _init_compute_node
        resources["host_ip"] = cfg.CONF.my_ip
        if resources.get("cpu_info") is None:
            resources["cpu_info"] = ""
        try:
            init(record, resources)
        except Exception:  # noqa: BLE001 - that node goes through nova's update instead
            LOG.exception("Node %s: not taken up at the service's start; nova's start-up "
                          "update goes over it", node)
            continue
        taken.append(node)
    return taken


def nodes_at_start(context, host, nodes):
    """Of ``nodes`` (the ring's now), those nova's start-up may treat as this service's:
    each whose compute node record is this host's, or has none yet.

    nova's start-up puts in ERROR every BUILDING server with an allocation on a node it
    is given (``_error_out_instances_whose_build_was_interrupted``): builds cast here that
    this service, stopped, never took.  A node the ring gives back to a service coming
    back is still another service's until its resource tracker moves the node's record
    here: the scheduler casts the node's builds to the record's host, and a build in
    flight there would be put in ERROR under it (seen in an upgrade's boot loop).  Those
    nodes are left out of the start-up; the periodic takes them up as before."""
    records = objects.ComputeNodeList.get_all_by_uuids(context, list(nodes))
    elsewhere = {record.uuid for record in records if record.host != host}
    if elsewhere:
        LOG.info("start-up: %d nodes the ring gives here are still other services' "
                 "(their compute node records): their builds are theirs, not ended here "
                 "as interrupted", len(elsewhere))
    return [node for node in nodes if node not in elsewhere]
