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

"""The self-fence: before an operation on a server, is it still homed here?

A nova-compute paused past its lease and ``service_down_time`` (a VM pause, a
stalled process, SIGSTOP) resumes with its in-flight threads and the requests queued
for it, while a survivor may have moved its servers meanwhile.  Two checks, each one
read of nova's database (operations on servers are rare next to the periodic's node
reads):

* ``guard_manager``: each request nova's manager takes for a server (a delete, a
  reboot, a power change ...) first waits until this service is a live member of its
  group again when its lease lapsed (it finds out before it acts), then reads where
  nova homes the server now: one moved away is dropped here, before nova's manager
  writes anything (no instance action, no task state, no port deallocated).  Its new
  home did what the request asked (``recovery``);
* the driver's operations (``check``), for an operation already under way when the
  move happened: refused with ``Refused``, never ``InstanceNotFound`` (nova's manager
  would take the server as gone and deallocate its ports);
* nova's build handler: a build queued for this service while it was fenced, which a
  survivor ended meanwhile (``queued_builds``), is dropped.
"""

import functools
import inspect
import logging
import time

from nova import context as nova_context
from nova import exception
from nova import objects
from nova.compute import vm_states
from oslo_config import cfg

from rp_reporter import rehoming
from rp_reporter.nova_compute import fencing
from rp_reporter.nova_compute import server_groups

LOG = logging.getLogger(__name__)
CONF = cfg.CONF

# nova's ComputeManager handlers of requests for a server on this host (those a
# release lacks are skipped).  A build is not one: the server is not homed anywhere yet
# (BUILD: its own check).
REQUESTS = (
    "terminate_instance", "soft_delete_instance", "restore_instance", "reboot_instance",
    "stop_instance", "start_instance", "rebuild_instance", "rescue_instance",
    "unrescue_instance", "pause_instance", "unpause_instance", "suspend_instance",
    "resume_instance", "trigger_crash_dump", "attach_interface", "detach_interface",
    "set_admin_password", "snapshot_instance", "backup_instance", "shelve_instance",
    "shelve_offload_instance", "inject_network_info")
BUILD = "build_and_run_instance"


class Refused(exception.NovaException):
    """The server is not this service's to act on (see the module's docstring)."""

    msg_fmt = "Instance %(instance_id)s is not this compute service's to act on: %(reason)s"


class DestroyRefused(Refused, exception.InstancePowerOffFailure):
    """A refused destroy: nova's manager re-raises a power-off failure without
    deallocating the server's network, which any other error would."""


def where(instance):
    """(where nova homes ``instance`` now, whether this service is forced down), or
    None when nova no longer has it (deleted meanwhile)."""
    ctxt = nova_context.get_admin_context()
    try:
        homed_on = objects.Instance.get_by_uuid(ctxt, instance.uuid, expected_attrs=[]).host
    except exception.InstanceNotFound:
        return None
    return homed_on, fencing.forced_down(ctxt, CONF.host)


def refusal(instance):
    """Why this service must not act on ``instance`` now, or None."""
    found = where(instance)
    return found and rehoming.refusal(found[0], CONF.host, found[1])


def check(instance, operation, metrics):
    """Raise ``Refused`` if this service must not run ``operation`` on ``instance``
    (counted in ``metrics``, the driver's DriverMetrics)."""
    reason = refusal(instance)
    if reason:
        LOG.error("refused to %s instance %s on node %s: %s", operation, instance.uuid,
                  instance.node, reason)
        metrics.refused.labels(operation).inc()
        raise (DestroyRefused if operation == "destroy" else Refused)(
            instance_id=instance.uuid, reason=reason)


def guard_manager(manager, membership, metrics, self_fence=None):
    """Put the request check (after ``self_fence``'s, a SelfFence) in front of each of
    nova's handlers on ``manager``, and the build check in front of its build handler."""
    for name in REQUESTS:
        handler = getattr(manager, name, None)
        if handler is not None:
            setattr(manager, name, _guarded_request(name, handler, membership, metrics,
                                                    self_fence))
    build = getattr(manager, BUILD, None)
    if build is not None:
        setattr(manager, BUILD, _guarded_build(build, metrics, self_fence))


def _guarded_build(handler, metrics, self_fence):
    """A build found in the queue of a service that comes back: one a survivor ended
    meanwhile (``queued_builds``: no longer building) is dropped, as nova's handler
    drops a build whose task state changed; nova's own handler would start it again
    (it sets the server building) with no allocation left for its node."""
    signature = inspect.signature(handler)

    @functools.wraps(handler)
    def build(*args, **kwargs):
        if self_fence is not None:
            self_fence.check(f"nova's {BUILD}", confirm=True)
        arguments = signature.bind(*args, **kwargs).arguments
        instance = arguments.get("instance")
        if instance is not None and not still_building(instance):
            LOG.error("refused to %s instance %s: it is no longer building (its build was "
                      "ended while this service was fenced); the request is dropped here",
                      BUILD, instance.uuid)
            metrics.refused.labels(BUILD).inc()
            return None
        if instance is not None:  # what a move of it must respect, no upcall needed then
            server_groups.remember(instance, arguments.get("request_spec"))
        return handler(*args, **kwargs)
    return build


def still_building(instance):
    """Whether nova's database still has ``instance`` building (or no longer has it:
    nova's handler deals with that)."""
    try:
        found = objects.Instance.get_by_uuid(nova_context.get_admin_context(),
                                             instance.uuid, expected_attrs=[])
    except exception.InstanceNotFound:
        return True
    return found.vm_state == vm_states.BUILDING


def _guarded_request(name, handler, membership, metrics, self_fence):
    signature = inspect.signature(handler)

    @functools.wraps(handler)
    def request(*args, **kwargs):
        if self_fence is not None:
            self_fence.check(f"nova's {name}", confirm=True)
        instance = (signature.bind(*args, **kwargs).arguments.get("instance")
                    or kwargs.get("instance"))
        reason = instance is not None and moved_away(instance, membership)
        if reason:
            LOG.error("refused to %s instance %s: %s; the request is dropped here (the "
                      "server's new home did what it asked)", name, instance.uuid, reason)
            metrics.refused.labels(name).inc()
            return None
        return handler(*args, **kwargs)
    return request


def moved_away(instance, membership):
    """Why ``instance`` is no longer this service's (moved away, or deleted by its new
    home), or None.  Read once this service is a live member again (at most a lease),
    and once a forced-down flag on it is gone (a mover's: it clears at the next renewal;
    an operator's may stay, and a service that nova takes requests for acts on its
    servers as it does with nova's own driver)."""
    deadline = time.monotonic() + membership.lease
    while membership.fenced and time.monotonic() < deadline:
        time.sleep(0.2)
    deadline = time.monotonic() + membership.lease
    while True:
        found = where(instance)
        if found is None:  # a delete asked of this service, carried out by a new home
            return "the server is deleted"
        reason = rehoming.refusal(found[0], CONF.host, False)
        if reason or not found[1] or time.monotonic() >= deadline:
            return reason
        time.sleep(0.5)
