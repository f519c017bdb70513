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

"""Builds cast to a fenced service that it never took (``queued_builds``), in nova's own
cell database (nova's test fixture: the real schema on sqlite), through nova's real
Instance objects and their compare-and-swap save; Placement's allocations as nova's
report client answers them."""

import uuid

import nova.conf
from nova import objects
from nova.compute import task_states
from nova.compute import vm_states
from nova.scheduler.client import report

from rp_reporter.nova_compute import guard
from rp_reporter.nova_compute import metrics as driver_metrics
from rp_reporter.nova_compute import queued_builds
from rp_reporter.nova_compute import restart

CONF = nova.conf.CONF
FENCED = "compute-dead"


class ReportClient:
    """nova's report client, as far as allocations go: ``allocations`` {node: {consumer:
    ...}}; reads of ``failing`` nodes raise; ``deleted``: consumers given back."""

    def __init__(self, allocations, failing=()):
        self.allocations, self.failing, self.deleted = allocations, set(failing), []

    def get_allocations_for_resource_provider(self, ctxt, node):
        if node in self.failing:
            raise RuntimeError(f"provider {node}: 503")
        return report.ProviderAllocInfo(allocations=dict(self.allocations.get(node, {})))

    def delete_allocation_for_instance(self, ctxt, consumer, consumer_type="instance",
                                       force=False):
        self.deleted.append(consumer)
        for held in self.allocations.values():
            held.pop(consumer, None)


def a_server(ctxt, vm_state=vm_states.BUILDING, task_state=task_states.SCHEDULING,
             host=None):
    instance = objects.Instance(context=ctxt, uuid=str(uuid.uuid4()), project_id="p",
                                user_id="u", vm_state=vm_state, task_state=task_state,
                                host=host)
    instance.create()
    return instance


def test_a_build_cast_to_a_fenced_service_it_never_took_ends_and_gives_its_node_back(cell):
    ctxt = cell
    queued = a_server(ctxt)  # cast to the fenced service, never taken
    taken = a_server(ctxt, task_state=task_states.SPAWNING, host="compute-a")
    active = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=None, host="compute-a")
    nodes = [str(uuid.uuid4()) for _ in range(4)]
    allocations = {nodes[0]: {queued.uuid: {}}, nodes[1]: {taken.uuid: {}},
                   nodes[2]: {active.uuid: {}}}
    client = ReportClient(allocations, failing=[nodes[3]])
    booked = {node: queued_builds.booked_on(ctxt, client, node) for node in nodes}
    assert booked[nodes[3]] == set()  # Placement failed: nothing looked for there
    queued_builds.end(ctxt, client, FENCED, booked)
    assert client.deleted == [queued.uuid]
    found = objects.Instance.get_by_uuid(ctxt, queued.uuid)
    assert (found.vm_state, found.task_state, found.host) == (vm_states.ERROR, None, None)
    fault = objects.InstanceFault.get_latest_for_instance(ctxt, queued.uuid)
    assert f"cast to compute service {FENCED}, which was fenced" in fault.message
    for untouched in (taken, active):
        again = objects.Instance.get_by_uuid(ctxt, untouched.uuid)
        assert (again.vm_state, again.task_state) == (untouched.vm_state,
                                                      untouched.task_state)
    # The fenced service comes back and finds the build's message in its queue: the
    # build handler drops it (nova's own would set the server building again).
    assert not guard.still_building(queued) and guard.still_building(a_server(ctxt))


def test_a_build_taken_meanwhile_is_left_as_it_is(cell, monkeypatch):
    """The compare-and-swap: a service that came back took the build between the read
    and the write (nova's build handler set its task state): nothing written."""
    ctxt = cell
    queued = a_server(ctxt)
    node = str(uuid.uuid4())
    client = ReportClient({node: {queued.uuid: {}}})
    listed = objects.InstanceList.get_by_filters

    def taken_meanwhile(*args, **kwargs):
        found = listed(*args, **kwargs)
        row = objects.Instance.get_by_uuid(ctxt, queued.uuid)
        row.task_state = task_states.SPAWNING
        row.save()
        return found
    monkeypatch.setattr(objects.InstanceList, "get_by_filters", taken_meanwhile)
    queued_builds.end(ctxt, client, FENCED, {node: {queued.uuid}})
    assert client.deleted == []
    again = objects.Instance.get_by_uuid(ctxt, queued.uuid)
    assert (again.vm_state, again.task_state) == (vm_states.BUILDING, task_states.SPAWNING)


def test_a_round_that_fails_leaves_each_unsettled_build_to_the_next(cell, monkeypatch):
    """Placement down for a moment as the build's allocation is given back, or nova's
    database unreachable for one node's read: what failed is not settled (so the group's
    record keeps it) and the next round finishes it; the other nodes go on."""
    ctxt = cell
    queued, other = a_server(ctxt), a_server(ctxt)
    gone, settled_before = a_server(ctxt), a_server(ctxt, vm_state=vm_states.ACTIVE,
                                                    task_state=None, host="compute-a")
    nodes = sorted(str(uuid.uuid4()) for _ in range(2))
    client = ReportClient({nodes[0]: {queued.uuid: {}}, nodes[1]: {other.uuid: {}}})
    delete = client.delete_allocation_for_instance

    def placement_down(ctxt, consumer, **kwargs):
        raise RuntimeError("placement: 503")
    client.delete_allocation_for_instance = placement_down
    gone.destroy()
    booked = {nodes[0]: {queued.uuid, gone.uuid, settled_before.uuid}, nodes[1]: {other.uuid}}
    first = queued_builds.end(ctxt, client, FENCED, booked)
    assert queued.uuid not in first.get(nodes[0], ()) and nodes[1] not in first
    assert objects.Instance.get_by_uuid(ctxt, queued.uuid).vm_state == vm_states.ERROR
    client.delete_allocation_for_instance = delete
    listed = objects.InstanceList.get_by_filters

    def database_gone_for_one(ctxt, filters, **kwargs):
        if other.uuid in filters["uuid"]:
            raise RuntimeError("database: gone away")
        return listed(ctxt, filters, **kwargs)
    monkeypatch.setattr(objects.InstanceList, "get_by_filters", database_gone_for_one)
    assert queued_builds.end(ctxt, client, FENCED, booked) == {nodes[0]: booked[nodes[0]]}
    assert client.deleted == [queued.uuid]  # given back, though it was ended before
    monkeypatch.setattr(objects.InstanceList, "get_by_filters", listed)
    assert queued_builds.end(ctxt, client, FENCED, {nodes[1]: {other.uuid}}) == {
        nodes[1]: {other.uuid}}
    assert client.deleted == [queued.uuid, other.uuid]
    assert objects.Instance.get_by_uuid(ctxt, other.uuid).vm_state == vm_states.ERROR


def test_the_build_handler_of_a_service_back_drops_an_ended_build(cell):
    ctxt = cell
    ended = a_server(ctxt, vm_state=vm_states.ERROR, task_state=None)
    building = a_server(ctxt)
    ran = []

    class Manager:
        @staticmethod
        def build_and_run_instance(context, instance, image, request_spec,
                                   filter_properties, accel_uuids, admin_password=None):
            ran.append(instance.uuid)

    manager = Manager()
    metrics = driver_metrics.DriverMetrics()
    guard.guard_manager(manager, membership=None, metrics=metrics)
    for instance in (ended, building):
        manager.build_and_run_instance(ctxt, instance, {}, None, {}, [])
    assert ran == [building.uuid]
    assert metrics.refused.labels(guard.BUILD)._value.get() == 1


def a_record(ctxt, node, host):
    record = objects.ComputeNode(
        context=ctxt, uuid=node, hypervisor_hostname=node, host=host, vcpus=0, memory_mb=0,
        local_gb=0, vcpus_used=0, memory_mb_used=0, local_gb_used=0, hypervisor_type="ironic",
        hypervisor_version=1, cpu_info="")
    record.create()
    return record


def test_a_service_coming_back_leaves_to_others_the_nodes_whose_records_they_hold(cell):
    """nova's start-up ends as interrupted the BUILDING servers with allocations on the
    nodes it is given: only nodes whose records are this host's (or have none yet) are,
    so a build cast to the service that holds a node's record, in flight there while the
    ring gives the node back to a returning service, is not put in ERROR under it."""
    ctxt = cell
    mine, theirs, new = (str(uuid.uuid4()) for _ in range(3))
    a_record(ctxt, mine, "compute-back")
    a_record(ctxt, theirs, "compute-survivor")
    assert restart.nodes_at_start(ctxt, "compute-back", [mine, theirs, new]) == [mine, new]
    assert restart.nodes_at_start(ctxt, "compute-back", []) == []
