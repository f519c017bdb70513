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
  is retried then.  Here a node is taken as looked at when nova's resource tracker asks
  the driver for its resources (``get_available_resource``, once per node it goes
  over); nova's own line for a node whose update failed (or for the whole periodic)
  makes it, or every node of the latest answer, due again at the next one;
* nova asks ``get_available_nodes`` outside its periodic too: a build takes its first
  node as "this host's node" (``ComputeManager._get_nodename``, in a hard anti-affinity
  group's check among others).  So the answer is never empty while a node is managed
  here, and asking changes nothing but the orphan warning's quiet set (the nodes left
  out of the latest answer); the periodic's line is logged for nova's periodic only.
"""

import json
import logging
import threading
import time

from nova import context as nova_context
from nova import objects
from oslo_config import cfg
from oslo_service import periodic_task

from rp_reporter import tracker_passes

LOG = logging.getLogger(__name__)
NOVA_MANAGER = NOVA_MANAGER_LOG = "nova.compute.manager"  # its module and its logger
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
    """The driver's part: ``for_periodic`` from its ``get_available_nodes``, ``looked_at``
    from its ``get_available_resource``, ``touched`` after an operation on a node."""

    def __init__(self, full_pass_every, interval_s=None):
        enabled = full_pass_every > 1
        if enabled and interval_s is None:
            interval_s = update_interval_s()
        self.passes = tracker_passes.TrackerPasses(full_pass_every, interval_s or 60.0)
        self.clock = time.monotonic
        self._listed = frozenset()  # every node of the last listing of the fleet
        self._lock = threading.Lock()
        self._given = ()  # the nodes of the latest answer
        self._lines = None
        if enabled:
            self._lines = NovaLines(self._failed)
            for name in (NOVA_MANAGER_LOG, PERIODIC_TASK_LOG):
                logging.getLogger(name).addFilter(self._lines)

    def for_periodic(self, managed, node_cache, log=False, in_scope=None, seen=(None, {}),
                     take_up=None):
        """The nodes of ``managed`` (nova's answer: every node this service manages) due at
        nova's periodic; ``node_cache``: nova's, the nodes as just listed; ``log``: the
        call starts nova's periodic, which the line is logged for; ``in_scope(uuids)``:
        those of ``uuids`` Ironic holds in this service's scope now, or None (given for
        nova's periodic: a node due that the periodic's own listing did not hold is
        checked first); ``seen``: (when that listing started, {uuid: when a listing last
        held the node}); ``take_up(free nodes)``: at the service's start, the free nodes
        due that need no update before requests (``restart``), left out of the answer and
        due still.  Which nodes are due is not changed by the question (nova asks it from
        a build too)."""
        if not self.passes.enabled:
            return managed
        with self._lock:
            # A node absent from this service's nodes is due when back (nova's refresh
            # just saw it go; the same answer however often that is seen).
            self.passes.keep_only(managed)
            prints = {uuid: fingerprint(node_cache[uuid]) for uuid in managed
                      if uuid in node_cache}
            now = self.clock()
            due = self.passes.due(prints, now)
            # A managed node missing from the cache (nova reads it on its own) goes over.
            due += [uuid for uuid in managed if uuid not in node_cache]
            gone = waiting = frozenset()
            if in_scope is not None:
                gone, waiting = self._out_of_scope(due, prints, node_cache, in_scope, seen)
                due = [uuid for uuid in due if uuid not in gone | waiting]
            answer = list(due)
            taken = frozenset()
            if take_up is not None:
                taken = frozenset(take_up([uuid for uuid in due if uuid in node_cache
                                           and node_cache[uuid].instance_id is None]))
                answer = [uuid for uuid in due if uuid not in taken]
            if not answer and set(prints) - waiting:
                # nova takes the first node of this answer as "this host's node" (a
                # build's anti-affinity check, among others): never empty while a node
                # is managed here.  The node nova looked at least recently is the one
                # closest to due anyway: its look is the full pass's work, done early.
                # For nova's periodic, which looks at it, it is checked in Ironic first.
                if in_scope is None:
                    answer = [self.passes.least_recent(
                        {uuid: value for uuid, value in prints.items() if uuid not in waiting})]
                else:
                    filler, more_gone = self._checked_filler(prints, node_cache, waiting,
                                                             in_scope, seen)
                    gone |= more_gone
                    answer = [filler] if filler else []
            self._given = tuple(answer)
            # nova's orphan handling stays for a node gone from Ironic's scope: nova
            # deletes the record of one deleted, and warns of one moved.
            self._lines.quiet = frozenset(managed) - frozenset(answer) - gone
            aged = self.passes.aged(prints, now)
            left = self.passes.next_aged_in(prints, now)
        if taken:
            LOG.info("resource tracker at the service's start: %d of %d nodes taken up with "
                     "their compute node records here (free; nova's update of each at its "
                     "first periodic), nova's start-up update over %d", len(taken),
                     len(managed), len(answer))
        elif log:
            self._log(answer, due, aged, len(managed), left)
        return answer

    def _out_of_scope(self, due, prints, node_cache, in_scope, seen):
        """(gone, waiting): the nodes due that the periodic's listing did not hold and
        Ironic no longer holds in this service's scope, which leave ``prints`` and nova's
        cache now; and those left out of this periodic, due still, as Ironic did not
        answer."""
        unseen = self.passes.unseen([uuid for uuid in due if uuid in prints], seen[1],
                                    seen[0])
        if not unseen:
            return frozenset(), frozenset()
        held = in_scope(unseen)
        if held is None:
            LOG.info("resource tracker periodic: %d nodes due wait for the next one (not "
                     "listed for this periodic, and Ironic does not answer)", len(unseen))
            return frozenset(), frozenset(unseen)
        return self._drop(set(unseen) - held, prints, node_cache), frozenset()

    def _checked_filler(self, prints, node_cache, waiting, in_scope, seen):
        """(filler, gone): where no node is due, the one nova is given all the same (the
        one it looked at least recently, the closest to due) among those that exist: the
        periodic's listing held it, or Ironic holds it in this service's scope now; None
        where none does or Ironic does not answer (nova's periodic then looks at nothing,
        rather than at a node that may be gone: a deleted node never reaches nova).  The
        nodes found gone on the way leave ``prints`` and nova's cache."""
        gone = frozenset()
        while set(prints) - waiting:
            candidate = self.passes.least_recent(
                {uuid: value for uuid, value in prints.items() if uuid not in waiting})
            if not self.passes.unseen([candidate], seen[1], seen[0]):
                return candidate, gone  # the periodic's own listing held it
            held = in_scope([candidate])
            if held is None:
                LOG.info("resource tracker periodic: no node for nova to look at (none "
                         "due, and Ironic does not answer for the one it would be given)")
                return None, gone
            if candidate in held:
                return candidate, gone
            gone |= self._drop({candidate}, prints, node_cache)
        return None, gone

    def _drop(self, lost, prints, node_cache):
        """The nodes ``lost`` from Ironic's scope leave ``prints``, nova's cache and the
        last listing's nodes."""
        for uuid in lost:
            del prints[uuid]
            node_cache.pop(uuid, None)
        self._listed -= lost
        return frozenset(lost)

    def _log(self, answer, due, aged, managed, left):
        longest = round(self.passes.longest_s)
        if len(due) == managed:
            LOG.info("resource tracker periodic: every node, %d (a full pass: each new here, "
                     "changed since nova's last look, or not looked at for %d s)",
                     managed, longest)
            return
        LOG.info("resource tracker periodic: %d of %d nodes (due: %d new here, changed or "
                 "touched since nova's last look, %d not looked at for %d s; %d not due, "
                 "the one nova looked at least recently), the others unchanged since "
                 "nova's last look and their providers kept by the agents (the next due "
                 "for its age in %s periodics)", len(answer), managed, len(due) - aged,
                 aged, longest, len(answer) - len(due), left)

    def looked_at(self, uuid, node):
        """nova's resource tracker looked at ``uuid`` (``node()``: as nova has it now)."""
        if not self.passes.enabled:
            return
        node = node()
        if node is not None:
            with self._lock:
                self.passes.looked_at(uuid, fingerprint(node), self.clock())

    def touched(self, uuid):
        """The driver operated on node ``uuid`` (a spawn, a destroy, a failed spawn's
        cleanup): nova counts or heals what only it knows of at the node's next update."""
        if self.passes.enabled and uuid:
            with self._lock:
                self.passes.touched({uuid})

    def forget(self, released):
        with self._lock:
            self.passes.forget(released)

    def _failed(self, nodes):
        """nova's update failed for ``nodes`` (None: every node of the latest answer)."""
        with self._lock:
            nodes = self._given if nodes is None else nodes
            self.passes.forget(nodes)
        if nodes:  # a periodic given no node has none to be due again
            LOG.info("resource tracker periodic: %d nodes due again at the next one (nova's "
                     "update of them failed)", len(nodes))

    def listed(self, nodes, whole_at):
        """A listing of the fleet (nova's node refresh) was made: these are its nodes,
        as of a whole listing that started at ``whole_at`` (this clock) and the nodes
        written since."""
        self._listed = frozenset(node.id for node in nodes)
        if self.passes.enabled:
            with self._lock:
                self.passes.whole_listed(whole_at)

    def known_to_exist(self, uuid):
        """Whether the last listing holds ``uuid`` (only while passes are enabled: nova's
        own answer otherwise)."""
        return self.passes.enabled and uuid in self._listed


def update_interval_s():
    """nova's update_resources_interval, as its periodic task reads it (0: oslo.service's
    default spacing; below 0 the periodic does not run, and the interval is moot)."""
    interval = cfg.CONF.update_resources_interval
    return float(interval) if interval > 0 else periodic_task.DEFAULT_INTERVAL


def service_disabled(host):
    """Compute service ``host``'s disabled flag in nova's database, or None when it
    cannot be read (nova's resource tracker reads it so at each look at a node)."""
    try:
        return objects.Service.get_by_compute_host(nova_context.get_admin_context(),
                                                   host).disabled
    except Exception:  # noqa: BLE001 - not read: the nodes' looks go on as they were
        LOG.debug("compute service %s's disabled flag not read", host, exc_info=True)
        return None


def at_start(frame):
    """Whether ``frame`` is nova's update at the service's start (``pre_start_hook``)."""
    return novas_periodic(frame) and frame.f_locals.get("startup") is True


def novas_periodic(frame):
    """Whether ``frame`` is nova's resource-tracker periodic
    (``ComputeManager.update_available_resource``, which asks the driver for its nodes
    first thing): the call the periodic's line is logged for, once per periodic, and
    not for a build's question."""
    return (frame is not None and frame.f_code.co_name == TASK
            and frame.f_globals.get("__name__") == NOVA_MANAGER)


EVERY_NODE = PeriodicNodes(1)  # nova's behaviour
