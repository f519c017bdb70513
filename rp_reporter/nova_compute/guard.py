"""The self-fence: before an operation on a server, is it still homed here?

A nova-compute paused past its lease and ``service_down_time`` (a VM pause, a
stalled process, SIGSTOP) resumes with its in-flight threads and the RPCs queued
for it, while a survivor may have moved its servers meanwhile.  Each driver
operation on a server first reads where nova homes the server now and whether
this service is forced down, and refuses (``InstanceNotFound``: nova's manager
takes the server as gone from here and writes nothing to it) unless the server
is still this service's.  One read of nova's database per operation; operations
on servers are rare next to the periodic's node reads.
"""

import logging

from nova import context as nova_context
from nova import exception
from nova import objects
from oslo_config import cfg

from rp_reporter import rehoming
from rp_reporter.nova_compute import rehome

LOG = logging.getLogger(__name__)
CONF = cfg.CONF


class Refused(exception.InstanceNotFound):
    """The server is not this service's to act on (see the module's docstring)."""

    msg_fmt = "Instance %(instance_id)s is not this compute service's to act on: %(reason)s"


def check(instance, operation, metrics):
    """Raise ``Refused`` if this service must not run ``operation`` on ``instance``
    (counted in ``metrics``, the driver's DriverMetrics)."""
    ctxt = nova_context.get_admin_context()
    try:
        homed_on = objects.Instance.get_by_uuid(ctxt, instance.uuid, expected_attrs=[]).host
    except exception.InstanceNotFound:
        return  # deleted meanwhile: nova's own handling applies
    own = rehome.service_record(ctxt, CONF.host)  # none yet: a new service, nothing forced
    reason = rehoming.refusal(homed_on, CONF.host, own is not None and own.forced_down)
    if reason:
        LOG.error("refused to %s instance %s on node %s: %s", operation, instance.uuid,
                  instance.node, reason)
        metrics.refused.labels(operation).inc()
        raise Refused(instance_id=instance.uuid, reason=reason)
