"""The nodes of nova's resource-tracker periodic, ``[rp_reporter] full_pass_every``.

Which nodes each periodic goes over is ``rp_reporter.tracker_passes``'s decision; this
is its side in nova, where two of nova's habits meet a node left out on purpose:

* nova's ``update_available_resource`` takes a compute node record of this host that the
  driver did not return as an orphan: it asks the driver whether the node was deleted in
  Ironic (nova's ``is_node_deleted`` reads the node: one GET per node and periodic) and,
  as it is not, logs "Found orphan compute node ... not deleting" and leaves the record.
  Here the answer comes from the listing the same periodic has just made (no read), and
  that warning is dropped for the nodes left out (one line of ours per periodic says how
  many there were);
* nova goes over every node again at its next periodic, so a node whose update failed
  is retried then.  Here a node is taken as looked at when it is given to the periodic;
  nova's own line for a node whose update failed (or for the whole periodic) makes it,
  or every node of that periodic, due again at the next one.
"""

import json
import logging
import threading

from rp_reporter import tracker_passes

LOG = logging.getLogger(__name__)
NOVA_MANAGER_LOG = "nova.compute.manager"
PERIODIC_TASK_LOG = "oslo_service.periodic_task"
ORPHAN_WARNING = "Found orphan compute node"
# nova's lines for one node's failed update (ComputeManager._update_available_resource_for_node)
NODE_FAILED = ("Error updating resources for node", "Compute node '%s' not found in "
               "update_available_resource")
# oslo.service's line for a periodic task that raised
TASK_FAILED = "Error during %(full_task_name)s"
TASK = "update_available_resource"


def fingerprint(node):
    """The values of the fields nova's periodic reads of an Ironic node (nova's
    ``_NODE_FIELDS``), comparable from one listing to the next."""
    return json.dumps(
        [node.power_state, node.target_power_state, node.provision_state,
         node.target_provision_state, node.last_error, node.is_maintenance,
         node.properties, node.instance_id, node.traits, node.resource_class],
        sort_keys=True, default=str)


def _failed_node(record):
    """The node a nova line says its update failed for, or None."""
    if not str(record.msg).startswith(NODE_FAILED):
        return None
    args = record.args
    return args.get("node") if isinstance(args, dict) else (args or (None,))[0]


class NovaLines(logging.Filter):
    """Reads nova's lines about the periodic: drops the orphan warning for the nodes left
    out on purpose (``quiet``), and calls ``failed(nodes or None)`` for a node whose
    update failed (None: the whole periodic failed)."""

    def __init__(self, failed):
        super().__init__()
        self.quiet = frozenset()
        self.failed = failed

    def filter(self, record):
        args = record.args
        if isinstance(args, dict) and str(record.msg).startswith(ORPHAN_WARNING):
            return args.get("hh") not in self.quiet
        if (str(record.msg) == TASK_FAILED and isinstance(args, dict)
                and str(args.get("full_task_name", "")).endswith(TASK)):
            self.failed(None)
        else:
            node = _failed_node(record)
            if node:
                self.failed({node})
        return True


class PeriodicNodes:
    """The driver's part: ``for_periodic`` from its ``get_available_nodes``."""

    def __init__(self, full_pass_every):
        self.passes = tracker_passes.TrackerPasses(full_pass_every)
        self._listed = frozenset()  # every node of the last listing of the fleet
        self._lock = threading.Lock()
        self._given = ()  # the nodes the latest periodic was given
        self._lines = None
        if self.passes.enabled:
            self._lines = NovaLines(self._failed)
            for name in (NOVA_MANAGER_LOG, PERIODIC_TASK_LOG):
                logging.getLogger(name).addFilter(self._lines)

    def for_periodic(self, managed, node_cache):
        """The nodes of ``managed`` (nova's answer: every node this service manages) the
        periodic goes over; ``node_cache``: nova's, the nodes as just listed."""
        if not self.passes.enabled:
            return managed
        with self._lock:
            due, full = self.passes.nodes(
                {uuid: fingerprint(node_cache[uuid]) for uuid in managed if uuid in node_cache})
            due_set = set(due)
            # A managed node missing from the cache (nova reads it on its own) goes over.
            due += [uuid for uuid in managed if uuid not in node_cache]
            self._lines.quiet = frozenset(u for u in managed if u not in due_set)
            self._given = tuple(due)
            left = self.passes.until_full()
        if full:
            LOG.info("resource tracker periodic: every node, %d (a full pass: one periodic "
                     "in %d)", len(due), self.passes.full_pass_every)
        else:
            LOG.info("resource tracker periodic: %d of %d nodes, the others unchanged since "
                     "nova's last look and their providers kept by the agents (full pass "
                     "in %d periodics)", len(due), len(managed), left)
        return due

    def forget(self, released):
        with self._lock:
            self.passes.forget(released)

    def _failed(self, nodes):
        """nova's update failed for ``nodes`` (None: every node of the latest periodic)."""
        with self._lock:
            nodes = self._given if nodes is None else nodes
            self.passes.forget(nodes)
        if nodes:  # a periodic given no node has none to be due again
            LOG.info("resource tracker periodic: %d nodes due again at the next one (nova's "
                     "update of them failed)", len(nodes))

    def listed(self, nodes):
        """A listing of the fleet (nova's node refresh) was made: these are its nodes."""
        self._listed = frozenset(node.id for node in nodes)

    def known_to_exist(self, uuid):
        """Whether the last listing holds ``uuid`` (only while passes are enabled: nova's
        own answer otherwise)."""
        return self.passes.enabled and uuid in self._listed


EVERY_NODE = PeriodicNodes(1)  # nova's behaviour
