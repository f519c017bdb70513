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

"""Tenancy through the one per-node sync: real NodeSync, NodeTraits, NodeTenancy and
ProviderSync over in-memory Ironic, Placement and nova (the real services: the
whole-nova suite)."""

import copy

import pytest

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import tenancy
from rp_reporter import traits
from rp_reporter.sync import capability_traits
from rp_reporter.sync import ironic as ironic_sync
from rp_reporter.sync import node as node_sync
from rp_reporter.sync import provider
from rp_reporter.sync import tenant_aggregates
from rp_reporter.sync.plan import Observed
from tests.unit.sync.test_tenant_aggregates import Nova

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
P, L = "p" * 32, "l" * 32
GOLD = {"CUSTOM_GOLD": model.inventory(0)}


class Ironic:
    def __init__(self, **fields):
        self.node = {"uuid": NODE, "resource_class": "gold", "provision_state": "available",
                     "power_state": "power off", "maintenance": False, "instance_uuid": None,
                     "traits": [], "extra": {}, "owner": None, "lessee": None,
                     "driver_internal_info": {}, **fields}
        self.writes = []

    def get_node(self, uuid, extra_fields=()):
        assert set(tenancy.FIELDS) <= set(extra_fields)
        return copy.deepcopy(self.node)

    def in_scope(self, record):
        return True

    def add_trait(self, uuid, trait):
        self.writes.append(("add", trait))
        self.node["traits"].append(trait)

    def remove_trait(self, uuid, trait):
        self.writes.append(("remove", trait))
        self.node["traits"].remove(trait)

    def record_derived_traits(self, uuid, names):
        self.writes.append(("record", tuple(sorted(names))))
        self.node["extra"][traits.RECORD_KEY] = sorted(names)


class Placement:
    def __init__(self):
        self.held = Observed(NODE, 1, GOLD, frozenset({model.MANAGED_TRAIT}),
                             aggregates=frozenset())
        self.writes = []

    def observe(self, uuid, aggregates=False):
        assert aggregates, "tenancy reads the aggregates"
        return self.held

    def _write(self, generation, **change):
        assert generation == self.held.generation
        self.writes.append(next(iter(change.items())))
        self.held = provider.dataclasses.replace(self.held, generation=generation + 1, **change)
        return generation + 1

    def set_traits(self, uuid, generation, names):
        return self._write(generation, traits=frozenset(names))

    def set_aggregates(self, uuid, generation, aggregates):
        return self._write(generation, aggregates=frozenset(aggregates))

    def set_inventories(self, uuid, generation, inventories):
        return self._write(generation, inventories=inventories)


def syncing(ironic, nova=None):
    nova = nova or Nova()
    placement = Placement()
    sync = node_sync.NodeSync(ironic, provider.ProviderSync(placement, aggregates=True))
    sync.tenancy = tenant_aggregates.NodeTenancy(tenant_aggregates.TenantAggregates(nova))
    sync.node_traits = capability_traits.NodeTraits(ironic, None, sync.tenancy)
    return sync, placement, nova


def tenant_uuid(nova, project):
    return next(a["uuid"] for a in nova.aggregates if tenancy.tenant_project(a) == project)


def test_a_public_node_gets_the_public_trait_in_ironic_and_placement():
    ironic = Ironic()
    sync, placement, nova = syncing(ironic)
    sync.sync(NODE)
    assert [w for w in ironic.writes if w[0] != "record"] == [("add", tenancy.PUBLIC_TRAIT)]
    assert tenancy.PUBLIC_TRAIT in placement.held.traits
    assert placement.held.aggregates == set() and nova.aggregates == []


def test_a_node_claimed_loses_the_trait_before_it_joins_its_projects_aggregate():
    ironic = Ironic()
    sync, placement, nova = syncing(ironic)
    sync.sync(NODE)
    ironic.node["owner"] = P
    placement.writes.clear()
    sync.sync(NODE)
    assert ("remove", tenancy.PUBLIC_TRAIT) in ironic.writes
    assert [kind for kind, _ in placement.writes] == ["traits", "aggregates"]
    assert tenancy.PUBLIC_TRAIT not in placement.held.traits
    assert placement.held.aggregates == {tenant_uuid(nova, P)}


def test_a_lease_moves_the_node_to_the_lessees_aggregate_and_back():
    ironic = Ironic(owner=P)
    sync, placement, nova = syncing(ironic)
    sync.sync(NODE)
    ironic.node["lessee"] = L
    sync.sync(NODE)
    assert placement.held.aggregates == {tenant_uuid(nova, L)}
    ironic.node["lessee"] = None
    sync.sync(NODE)
    assert placement.held.aggregates == {tenant_uuid(nova, P)}  # L's stays in nova, empty
    assert {tenancy.tenant_project(a) for a in nova.aggregates} == {P, L}


def test_ironics_automatic_lessee_leaves_a_deployed_node_public():
    ironic = Ironic(lessee=L, instance_uuid="9be26c0b-03f2-4d2e-ae87-c02d7f33c123",
                    driver_internal_info={"automatic_lessee": True})
    sync, placement, nova = syncing(ironic)
    sync.sync(NODE)
    assert tenancy.PUBLIC_TRAIT in placement.held.traits and nova.aggregates == []


def test_a_public_trait_set_by_hand_on_a_claimed_node_is_removed():
    ironic = Ironic(owner=P, traits=[tenancy.PUBLIC_TRAIT])
    sync, placement, _ = syncing(ironic)
    sync.sync(NODE)
    assert ironic.writes == [("remove", tenancy.PUBLIC_TRAIT)]
    assert tenancy.PUBLIC_TRAIT not in placement.held.traits


@pytest.mark.parametrize("fields", [{"owner": P}, {}, {"owner": P, "lessee": L},
                                    {"lessee": L, "driver_internal_info": {
                                        "automatic_lessee": True}}])
def test_a_node_in_step_costs_ironic_no_write_however_often_it_is_synced(fields):
    """Each write to a node is an update notification, and each notification a sync:
    a sync that wrote again would never stop (and hold the node's lock against nova's
    deploys)."""
    ironic = Ironic(**fields)
    sync, _, _ = syncing(ironic)
    sync.sync(NODE)
    settled = list(ironic.writes)
    for _ in range(3):
        sync.sync(NODE)
    assert ironic.writes == settled


def test_nova_refusing_the_aggregate_writes_nothing_and_is_retried():
    ironic = Ironic(owner=P)
    sync, placement, _ = syncing(ironic, Nova(status=403))
    with pytest.raises(errors.ServiceError) as raised:
        sync.sync(NODE)
    assert raised.value.kind == errors.DENIED
    assert ironic.writes == [] and placement.writes == []


def test_a_pass_skips_only_the_node_whose_aggregate_cannot_be_made():
    ironic = Ironic(owner=P)
    sync, _, _ = syncing(ironic, Nova(status=503))
    public = dict(ironic.node, uuid="2be26c0b-03f2-4d2e-ae87-c02d7f33c123", owner=None)
    desired, failures = sync.desired_from_records([dict(ironic.node), public],
                                                  lambda uuid: True, lambda *a: None)
    assert [d.uuid for d in desired] == [public["uuid"]]
    assert list(failures) == [NODE] and "tenant aggregates not made" in failures[NODE]


def test_of_driver_internal_info_a_record_keeps_the_automatic_lessee_flag_only():
    class Listed:
        _info = {"uuid": NODE, "lessee": L, "driver_internal_info": {
            "automatic_lessee": True, "agent_cached_clean_steps": {"deploy": ["x"] * 1000}}}
    record = ironic_sync._record(Listed, ("uuid", *tenancy.FIELDS))
    assert record == {"uuid": NODE, "owner": None, "lessee": L,
                      "driver_internal_info": {"automatic_lessee": True}}
    assert model.node_from_api(record).automatic_lessee


def test_a_dry_run_makes_no_aggregate_and_names_the_missing_one():
    ironic = Ironic(owner=P)
    sync, placement, nova = syncing(ironic)
    desired, failures = sync.desired_from_records([dict(ironic.node)], lambda uuid: True,
                                                  lambda *a: None, dry_run=True)
    assert desired == [] and nova.aggregates == [] and ironic.writes == []
    assert f"no tenant aggregate yet for project {P}" in failures[NODE]
    sync.sync(NODE)  # a real sync makes it; a dry run then plans with it
    desired, failures = sync.desired_from_records([dict(ironic.node)], lambda uuid: True,
                                                  lambda *a: None, dry_run=True)
    assert failures == {} and desired[0].aggregates == {tenant_uuid(nova, P)}
