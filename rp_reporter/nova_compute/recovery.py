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

"""What a move does to a server: what nova does to it when its service restarts.

A server re-homed from a fenced service is, to its new home, what each instance is to a
nova-compute that starts: nova's ``ComputeManager._init_instance`` runs on it, on this
service's own manager, with the task state the fenced service left.  So a build or a
rebuild in flight ends in ERROR, a delete is carried out (the server deleted, its node
cleaned), a power off or on is retried, a snapshot's or a resize's task state is
cleared, an idle server is left as it is.  Where the move differs from a restart:

* a reboot asked through nova's API and queued for the fenced service (``rebooting``,
  ``rebooting_hard``, the request never taken) is retried here, as nova retries a reboot
  its service had taken (``reboot_pending``): nova's restart would clear it and let the
  queued request run, but the queue is the fenced service's, and its request is dropped
  there (``guard``);
* a build ended this way gets a fault saying why (nova's restart writes none);
* any other task state nova's restart leaves for the queued request (``rescuing``,
  ``pausing`` ...) is cleared, the request being lost with the fenced service's queue,
  and logged: asked again, it runs here.
"""

import logging

from nova import exception
from nova import objects
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states

LOG = logging.getLogger(__name__)

# Asked and queued, never taken: retried as nova retries one its service had taken.
ASKED_REBOOTS = {task_states.REBOOTING: task_states.REBOOT_PENDING,
                 task_states.REBOOTING_HARD: task_states.REBOOT_PENDING_HARD}
BUILD_STATES = (task_states.SCHEDULING, task_states.BLOCK_DEVICE_MAPPING,
                task_states.NETWORKING, task_states.SPAWNING)
# What nova's _init_instance reads of an instance (its init_host loads these).
EXPECTED_ATTRS = ["info_cache", "metadata", "system_metadata", "numa_topology"]


def building(instance):
    """nova's _init_instance test for a build its service died in."""
    return instance.vm_state == vm_states.BUILDING or instance.task_state in BUILD_STATES


def recover(manager, ctxt, instance, fenced_host):
    """Run nova's ``_init_instance`` on ``instance``, just re-homed here from
    ``fenced_host``, on ``manager`` (this service's ComputeManager)."""
    instance = objects.Instance.get_by_uuid(ctxt, instance.uuid, expected_attrs=EXPECTED_ATTRS)
    state = instance.task_state
    if building(instance):
        compute_utils.add_instance_fault_from_exc(ctxt, instance, exception.BuildAbortException(
            instance_uuid=instance.uuid,
            reason=f"its compute service {fenced_host} was fenced during the build (it "
                   f"died or stalled) and the server was re-homed to {manager.host}"))
    elif state in ASKED_REBOOTS:
        instance.task_state = ASKED_REBOOTS[state]
        instance.save(expected_task_state=[state])
    if state is not None:
        LOG.warning("instance %s: re-homed in task state %s; nova's start-up handling of "
                    "it runs here", instance.uuid, state)
    moved_in = instance.task_state
    manager._init_instance(ctxt, instance)
    _clear_left_task_state(ctxt, instance.uuid, moved_in)


def _clear_left_task_state(ctxt, uuid, moved_in):
    """Clear ``moved_in``, the task state the server was moved in, if nova's start-up
    handling left it (a task state set since is a new request's, here)."""
    if moved_in is None:
        return
    try:
        instance = objects.Instance.get_by_uuid(ctxt, uuid, expected_attrs=[])
    except exception.InstanceNotFound:
        return  # deleted: the delete asked of the fenced service was carried out
    left = instance.task_state
    if left != moved_in or instance.vm_state == vm_states.DELETED:
        return
    instance.task_state = None
    try:
        instance.save(expected_task_state=[left])
    except exception.UnexpectedTaskStateError:
        return  # a request for it arrived here meanwhile: it has the server now
    LOG.warning("instance %s: task state %s cleared: the request was queued for the "
                "fenced service and is lost with it; asked again, it runs here", uuid, left)
