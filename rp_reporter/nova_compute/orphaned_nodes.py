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

"""Deployed nodes that nothing owns (``rp_reporter.orphans``), looked for by the service
the ring gives each node to, every ``[rp_reporter] orphaned_nodes_interval``: said once a
node (``node N is deployed for server S, which nova deleted at T ...``) and counted on
/metrics (``rp_reporter_orphaned_nodes``), and undeployed only where the operator turned
``undeploy_orphaned_nodes`` on: read again first, Ironic's node still naming that server
and nova's record of it still deleted, and past the self-fence (a write)."""

import logging
import threading
import time

from nova import context as nova_context
from nova import objects
from oslo_config import cfg
from oslo_utils import timeutils

from rp_reporter import orphans

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
CHUNK = 200  # servers read from nova's database at a time


class OrphanWatch:
    """``ring``: the service's CoordinatedRing; ``ironic``: a callable giving nova's
    openstacksdk baremetal proxy; ``metrics``: the driver's DriverMetrics."""

    def __init__(self, ring, ironic, metrics):
        self.ring = ring
        self.ironic = ironic
        self.metrics = metrics
        self._said = set()  # (node, server) already logged

    def start(self):
        threading.Thread(target=self._loop, name="rp-reporter-orphaned-nodes",
                         daemon=True).start()
        return self

    def _loop(self):
        while True:
            time.sleep(CONF.rp_reporter.orphaned_nodes_interval)
            try:
                self.run_once(nova_context.get_admin_context(read_deleted="yes"))
            except Exception:  # noqa: BLE001 - looked for again at the next interval
                LOG.exception("looking for deployed nodes that nothing owns failed; the "
                              "next look tries again")

    def run_once(self, ctxt):
        """One look; returns the orphaned nodes found ([(node, server, deleted_at)])."""
        members = self.ring.members()
        if not members:  # not a live member: another service looks
            return []
        hashring, me = self.ring.ring_of(members), CONF.host.lower()
        associated = {node.id: node.instance_id for node in self._associated()
                      if me in hashring.get_nodes(node.id.encode())}
        found = orphans.orphaned(associated, self._deleted_at(ctxt, associated.values()),
                                 timeutils.utcnow(), CONF.rp_reporter.orphaned_nodes_grace)
        self.metrics.orphaned_nodes.set(len(found))
        for node, server, deleted_at in found:
            self._say(node, server, deleted_at)
            if CONF.rp_reporter.undeploy_orphaned_nodes:
                self._undeploy(ctxt, node, server)
        return found

    def _associated(self):
        """Ironic's nodes with a server, in this service's [ironic] shard and conductor
        group (as nova's own listing filters them)."""
        query = {"associated": True, "fields": ("uuid", "instance_id")}
        if CONF.ironic.shard:
            query["shard"] = CONF.ironic.shard
        if CONF.ironic.conductor_group is not None:
            query["conductor_group"] = CONF.ironic.conductor_group
        return list(self.ironic().nodes(**query))

    @staticmethod
    def _deleted_at(ctxt, servers):
        """{server: when nova deleted it, or None while nova has it} of those nova's
        cell database has a record of (deleted ones included: ``read_deleted``)."""
        servers, found = sorted(set(servers)), {}
        for at in range(0, len(servers), CHUNK):
            for instance in objects.InstanceList.get_by_filters(
                    ctxt, {"uuid": servers[at:at + CHUNK]}, expected_attrs=[]):
                found[instance.uuid] = instance.deleted_at if instance.deleted else None
        return found

    def _say(self, node, server, deleted_at):
        if (node, server) in self._said:
            return
        self._said.add((node, server))
        LOG.warning("node %s is deployed for server %s, which nova deleted at %s (deleted "
                    "while its compute service was down, nova deletes it locally): nothing "
                    "owns the node; %s", node, server, deleted_at.isoformat(" ", "seconds"),
                    "it is undeployed now ([rp_reporter] undeploy_orphaned_nodes)"
                    if CONF.rp_reporter.undeploy_orphaned_nodes else
                    "undeploy it (openstack baremetal node undeploy), or set [rp_reporter] "
                    "undeploy_orphaned_nodes")

    def _undeploy(self, ctxt, node, server):
        found = self.ironic().get_node(node, fields=("uuid", "instance_id"))
        again = self._deleted_at(ctxt, [server]).get(server)
        if found.instance_id != server or again is None:
            LOG.info("node %s: no longer orphaned (Ironic names %s on it, nova's record of "
                     "%s: %s); left as it is", node, found.instance_id, server,
                     "deleted" if again else "live or gone")
            return
        fence = self.ring.self_fence
        if fence is not None:
            fence.check(f"undeploying orphaned node {node}", confirm=True)
        self.ironic().set_node_provision_state(node, "deleted")
        self.metrics.orphaned_undeployed.inc()
        LOG.warning("node %s: undeployed (server %s was deleted in nova)", node, server)
