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

"""Builds cast to a fenced service that it never took: ended, as its restart would.

nova's scheduler books a build's node in Placement and casts the build to the node's
compute service; the service names itself the server's host only once it takes the
build.  Cast to a service that died first, the build waits in that service's queue:
no host, BUILD for ever, its allocation pinning the node.  nova's own start-up ends such
builds (``_error_out_instances_whose_build_was_interrupted``: BUILDING instances with
allocations on the service's nodes and no host go to ERROR); a fenced service that never
returns never runs it.  The survivor that took over the fenced service's free nodes
does it for those nodes instead, and, as nova's manager does with a build it aborts,
gives back the build's allocation, so the node is offered again; the server gets a
fault saying why.  A fenced service that comes back later finds
the build's message in its queue: nova's own build handler drops it then (``guard``:
the server is no longer building).

Which builds were cast to the fenced service: those booked on a node before this service
claimed it from that service (``rehoming.taken_from_the_departed``), read as its resource
tracker first looks at the node, right before it moves the node's compute node record
here (from then on the scheduler casts the node's builds here).  A build booked between
that read and the record's move (milliseconds) is not seen.  What was read is recorded
in the group's record at once (``group_record``, ``queued``) and erased only once each
build is settled: a round that fails (Placement or the bus down for a moment), or a
survivor that restarts or dies, leaves it to the next round of any survivor.
"""

import logging

from nova import exception
from nova import objects
from nova.compute import utils as compute_utils
from nova.compute import vm_states

from rp_reporter import rehoming

LOG = logging.getLogger(__name__)


def booked_on(ctxt, reportclient, node):
    """The consumers of the allocations on ``node``'s provider now (nova's report
    client), or an empty set if Placement does not answer (logged)."""
    try:
        return set(reportclient.get_allocations_for_resource_provider(ctxt, node).allocations)
    except Exception:  # noqa: BLE001 - one node's error; the others go on
        LOG.warning("node %s: Placement's allocations could not be read as it was taken "
                    "over; a build queued to its former owner on it is not looked for",
                    node, exc_info=True)
        return set()


def end(ctxt, reportclient, fenced_host, booked):
    """End the builds cast to the fenced ``fenced_host`` that it never took: ``booked``
    {node: the consumers booked on it before a survivor claimed it from that one}.
    Returns {node: consumers} of those settled (ended here, given back, taken by a
    service, or gone); a node whose reads or writes failed is logged and tried again
    at the next round (the group's record keeps it: ``group_record``)."""
    settled = {}
    for node, consumers in sorted(booked.items()):
        try:
            found = objects.InstanceList.get_by_filters(ctxt, {"uuid": sorted(consumers)},
                                                        expected_attrs=[])
            for instance in found:
                step = rehoming.queued_build_step(instance)
                if step == "end":
                    _end_one(ctxt, reportclient, instance, node, fenced_host)
                elif step == "give back":  # ended, and a round failed before this write
                    reportclient.delete_allocation_for_instance(ctxt, instance.uuid)
                settled.setdefault(node, set()).add(instance.uuid)
            # gone: deleted through nova's API, which gave back its allocation
            settled.setdefault(node, set()).update(set(consumers) - {i.uuid for i in found})
        except Exception:  # noqa: BLE001 - one node's error; tried again next round
            LOG.warning("node %s: the builds queued to fenced compute service %s could not "
                        "all be ended; the next round tries again", node, fenced_host,
                        exc_info=True)
    return settled


def _end_one(ctxt, reportclient, instance, node, fenced_host):
    found = instance.task_state
    instance.vm_state, instance.task_state = vm_states.ERROR, None
    try:
        # taken meanwhile (by a service that came back), or deleted: not ours to end
        instance.save(expected_vm_state=[vm_states.BUILDING], expected_task_state=[found])
    except (exception.InstanceUpdateConflict, exception.InstanceNotFound) as e:
        LOG.info("instance %s: the build queued to fenced service %s changed meanwhile "
                 "(%s): left as it is", instance.uuid, fenced_host, e)
        return
    compute_utils.add_instance_fault_from_exc(ctxt, instance, exception.BuildAbortException(
        instance_uuid=instance.uuid,
        reason=f"its build was cast to compute service {fenced_host}, which was fenced "
               f"(it died or stalled) before it took it"))
    reportclient.delete_allocation_for_instance(ctxt, instance.uuid)
    LOG.warning("node %s: instance %s was queued for fenced compute service %s, which "
                "never took its build: ERROR (as nova's restart ends it), its allocation "
                "given back", node, instance.uuid, fenced_host)
