"""The nodes of nova's resource-tracker periodic, ``[rp_reporter] full_pass_every``.

Which nodes each periodic goes over is ``rp_reporter.tracker_passes``'s decision; this
is its side in nova.  nova's ``update_available_resource`` takes a compute node record
of this host that the driver did not return as an orphan: it asks the driver whether
the node was deleted in Ironic (nova's ``is_node_deleted`` reads the node, one GET per
node and periodic) and, as it is not, logs "Found orphan compute node ... not deleting"
and leaves the record.  For a node left out on purpose both are wrong: the answer comes
from the listing the same periodic has just made (no read), and nova's warning is
dropped for those nodes only (one line of ours per periodic says how many there were).
"""

import json
import logging
import threading

from rp_reporter import tracker_passes

LOG = logging.getLogger(__name__)
NOVA_MANAGER_LOG = "nova.compute.manager"
ORPHAN_WARNING = "Found orphan compute node"


def fingerprint(node):
    """The values of the fields nova's periodic reads of an Ironic node (nova's
    ``_NODE_FIELDS``), comparable from one listing to the next."""
    return json.dumps(
        [node.power_state, node.target_power_state, node.provision_state,
         node.target_provision_state, node.last_error, node.is_maintenance,
         node.properties, node.instance_id, node.traits, node.resource_class],
        sort_keys=True, default=str)


class QuietOrphans(logging.Filter):
    """Drops nova's orphan warning for the nodes this periodic left out on purpose."""

    def __init__(self):
        super().__init__()
        self.quiet = frozenset()

    def filter(self, record):
        args = record.args
        return not (isinstance(args, dict) and args.get("hh") in self.quiet
                    and str(record.msg).startswith(ORPHAN_WARNING))


class PeriodicNodes:
    """The driver's part: ``for_periodic`` from its ``get_available_nodes``."""

    def __init__(self, full_pass_every):
        self.passes = tracker_passes.TrackerPasses(full_pass_every)
        self._listed = frozenset()  # every node of the last listing of the fleet
        self._lock = threading.Lock()
        self._orphans = None
        if self.passes.enabled:
            self._orphans = QuietOrphans()
            logging.getLogger(NOVA_MANAGER_LOG).addFilter(self._orphans)

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
            self._orphans.quiet = frozenset(u for u in managed if u not in due_set)
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

    def listed(self, nodes):
        """A listing of the fleet (nova's node refresh) was made: these are its nodes."""
        self._listed = frozenset(node.id for node in nodes)

    def known_to_exist(self, uuid):
        """Whether the last listing holds ``uuid`` (only while passes are enabled: nova's
        own answer otherwise)."""
        return self.passes.enabled and uuid in self._listed


EVERY_NODE = PeriodicNodes(1)  # nova's behaviour
