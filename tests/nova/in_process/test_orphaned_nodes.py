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

"""Deployed nodes that nothing owns (``orphaned_nodes``), against nova's own cell
database (nova's fixture: the real schema on sqlite) and its real Instance objects; Ironic
as nova's openstacksdk proxy answers."""

import types
import uuid

import nova.conf
from nova import context as nova_context
from nova import objects

from rp_reporter.nova_compute import metrics as driver_metrics
from rp_reporter.nova_compute import options  # noqa: F401 - registers [rp_reporter]
from rp_reporter.nova_compute import orphaned_nodes

CONF = nova.conf.CONF
HOST = "compute-a"


class Ironic:
    """nova's baremetal proxy, as far as the watch asks: ``nodes`` {node: server}."""

    def __init__(self, nodes):
        self.associated, self.undeployed, self.queries = dict(nodes), [], []

    def nodes(self, **query):
        self.queries.append(query)
        return [types.SimpleNamespace(id=n, instance_id=s) for n, s in self.associated.items()]

    def get_node(self, node, fields=None):
        return types.SimpleNamespace(id=node, instance_id=self.associated.get(node))

    def set_node_provision_state(self, node, target):
        self.undeployed.append((node, target))


class Mine:
    """A ring that gives every node to this service, and one that gives none."""

    def __init__(self, owner):
        self.owner = owner

    def get_nodes(self, key):
        return {self.owner}


def a_server(ctxt, deleted):
    instance = objects.Instance(context=ctxt, uuid=str(uuid.uuid4()), project_id="p",
                                user_id="u", host="compute-gone")
    instance.create()
    if deleted:
        instance.destroy()  # nova's API's local delete: the record marked deleted
    return instance.uuid


def watch(ironic, owner=HOST):
    ring = types.SimpleNamespace(members=lambda: {HOST}, ring_of=lambda m: Mine(owner),
                                 self_fence=None)
    return orphaned_nodes.OrphanWatch(ring, lambda: ironic, driver_metrics.DriverMetrics())


def test_a_node_whose_server_nova_deleted_is_said_counted_and_left_by_default(
        cell, caplog):
    ctxt = nova_context.get_admin_context(read_deleted="yes")
    CONF.set_override("host", HOST)
    CONF.set_override("orphaned_nodes_grace", 0, group="rp_reporter")
    deleted, alive = a_server(ctxt, True), a_server(ctxt, False)
    ironic = Ironic({"node-deleted": deleted, "node-alive": alive,
                     "node-other-nova": str(uuid.uuid4())})
    job = watch(ironic)
    found = job.run_once(ctxt)
    assert [(node, server) for node, server, _ in found] == [("node-deleted", deleted)]
    assert job.metrics.orphaned_nodes._value.get() == 1
    assert ironic.undeployed == [] and ironic.queries[0]["associated"] is True
    job.run_once(ctxt)  # said once a node
    assert caplog.text.count("node node-deleted is deployed for server") == 1
    assert watch(ironic, owner="compute-b").run_once(ctxt) == []  # another's to say


def test_within_the_grace_nothing_is_orphaned_and_undeploy_needs_the_operators_word(cell):
    ctxt = nova_context.get_admin_context(read_deleted="yes")
    CONF.set_override("host", HOST)
    deleted = a_server(ctxt, True)
    ironic = Ironic({"node-deleted": deleted})
    assert watch(ironic).run_once(ctxt) == []  # the default grace: nova's reaper first
    CONF.set_override("orphaned_nodes_grace", 0, group="rp_reporter")
    CONF.set_override("undeploy_orphaned_nodes", True, group="rp_reporter")
    job = watch(ironic)
    assert len(job.run_once(ctxt)) == 1
    assert ironic.undeployed == [("node-deleted", "deleted")]
    assert job.metrics.orphaned_undeployed._value.get() == 1
    ironic.associated["node-deleted"] = a_server(ctxt, False)  # redeployed meanwhile
    ironic.undeployed.clear()
    assert watch(ironic).run_once(ctxt) == [] and ironic.undeployed == []
