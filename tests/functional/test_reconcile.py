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

"""One reconcile against real Placement and real Ironic: every node ends exactly right."""

import json
import threading
import time

import pytest

from rp_reporter import model
from rp_reporter.sync import observations
from rp_reporter.sync.provider import Outcome

GOLD = "CUSTOM_BAREMETAL_GOLD"
MANAGED = model.MANAGED_TRAIT

pytestmark = pytest.mark.functional


def writes(summary):
    return sum(n for method, n in summary.requests.items() if method != "GET")


def next_pass_reads(reconciler, nodes):
    """The Placement requests of the next pass when nothing changed: the provider
    listing, and two reads for each node whose turn of re-verification it is."""
    syncer = reconciler.provider_sync
    due = sum(observations.due(n, syncer.pass_number + 1, syncer.reverify_passes)
              for n in nodes)
    return {"GET": 1 + 2 * due}


def outcome_of(summary, node):
    (result,) = [r for r in summary.results if r.uuid == node]
    return result


def put_traits(placement, rp, traits):
    """Write a provider's traits as another writer would (nova's resource tracker, an
    earlier rp_reporter): custom names created first, generation-guarded."""
    for trait in traits:
        if trait.startswith("CUSTOM_"):
            placement._call("PUT", f"/traits/{trait}")
    current = placement._call("GET", f"/resource_providers/{rp}/traits")
    placement._call("PUT", f"/resource_providers/{rp}/traits", json={
        "resource_provider_generation": current["resource_provider_generation"],
        "traits": sorted(traits)})


@pytest.mark.every_release
def test_each_kind_of_node_ends_exactly_right(ironic, placement, reconciler):
    nodes = {
        "available": ironic.create(),
        "maintenance": ironic.create(maintenance=True),
        "manageable": ironic.create(state="manageable"),
        "enroll": ironic.create(state="enroll"),
        "active": ironic.create(state="active"),
        "power_off": ironic.create(power="power off"),
        "traits": ironic.create(traits=["CUSTOM_GPU", "HW_CPU_X86_AVX2"]),
        "no_class": ironic.create(resource_class=None),
        "odd_spelling": ironic.create(resource_class="Bare Metal.gold--XL"),
        "nothing_class": ironic.create(resource_class="---"),
    }
    summary = reconciler.run()
    assert summary.converged, summary.failures
    reserved = {name: placement.provider(node) for name, node in nodes.items()}

    assert reserved["available"]["inventories"] == {GOLD: (1, 0, 1)}
    assert reserved["available"]["name"] == nodes["available"]
    assert reserved["power_off"]["inventories"] == {GOLD: (1, 0, 1)}
    for unusable in ("maintenance", "manageable", "enroll", "active"):
        assert reserved[unusable]["inventories"] == {GOLD: (1, 1, 1)}, unusable
    assert reserved["traits"]["traits"] == {"CUSTOM_GPU", "HW_CPU_X86_AVX2", MANAGED}
    assert reserved["odd_spelling"]["inventories"] == {"CUSTOM_BARE_METAL_GOLD_XL": (1, 0, 1)}
    assert reserved["no_class"] is None and reserved["nothing_class"] is None

    assert summary.outcomes[Outcome.CREATED] == 8
    assert summary.outcomes[Outcome.SKIPPED] == 2
    assert summary.skipped == {"node has no resource_class": 1,
                               "resource_class '---' normalizes to nothing": 1}
    # Initial sync: create, traits, inventory: at most 3 writes per node,
    # plus one-time creation of classes and traits.
    one_time = 2 + 2  # two classes; MANAGED and CUSTOM_GPU
    assert writes(summary) <= 3 * 8 + one_time


@pytest.mark.every_release
def test_second_pass_writes_nothing(ironic, reconciler):
    nodes = ironic.create_many(4) + [ironic.create(traits=["CUSTOM_GPU"], maintenance=True)]
    first = reconciler.run()
    assert first.converged and first.outcomes[Outcome.CREATED] == 5
    expected = next_pass_reads(reconciler, nodes)
    second = reconciler.run()
    assert second.outcomes[Outcome.UNCHANGED] == 5
    assert writes(second) == 0
    # The warm cache makes it cost the two listings and this pass's re-reads.
    assert second.requests == expected


def test_second_pass_from_a_new_process_writes_nothing(ironic, cli):
    ironic.create_many(3)
    code, _, _ = cli("reconcile", "-f", "json")
    assert code == 0
    code, out, _ = cli("reconcile", "-f", "json")
    (row,) = json.loads(out)
    assert code == 0 and row["unchanged"] == 3 and row["created"] == 0
    assert set(row["placement_requests"]) == {"GET"}


def test_drift_of_k_nodes_costs_at_most_2k_writes(ironic, placement, reconciler):
    nodes = ironic.create_many(10)
    assert reconciler.run().converged
    drifted = nodes[:3]
    ironic.set_maintenance(drifted[0], True)
    ironic.set_traits(drifted[1], ["CUSTOM_NEW"])
    ironic.patch(drifted[2], instance_uuid="3a4f8b4e-3b0e-4a53-9d7e-2d0c1c1f5e11")
    summary = reconciler.run()
    assert summary.converged
    assert summary.outcomes[Outcome.UPDATED] == 3 and summary.outcomes[Outcome.UNCHANGED] == 7
    assert writes(summary) <= 2 * 3 + 1  # + the new trait, once
    assert placement.provider(drifted[0])["inventories"] == {GOLD: (1, 1, 1)}
    assert "CUSTOM_NEW" in placement.provider(drifted[1])["traits"]
    assert placement.provider(drifted[2])["inventories"] == {GOLD: (1, 1, 1)}


def test_traits_follow_the_node_and_nova_owned_traits_stay(ironic, placement, reconciler):
    # Invariant 5: Ironic's node traits are the truth, as in nova; what nova's resource
    # tracker sets (COMPUTE_*, OWNER_*) stays, anything else the node lacks goes.
    node = ironic.create(traits=["CUSTOM_A", "CUSTOM_B"])
    assert reconciler.run().converged
    put_traits(placement, node, placement.provider(node)["traits"] | {
        "CUSTOM_OPERATOR_SET", "COMPUTE_STATUS_DISABLED", "OWNER_NOVA"})
    ironic.set_traits(node, ["CUSTOM_A"])
    assert reconciler.run().converged
    assert placement.provider(node)["traits"] == {
        "CUSTOM_A", MANAGED, "COMPUTE_STATUS_DISABLED", "OWNER_NOVA"}


def test_providers_of_an_earlier_version_lose_their_twins_and_stale_traits(ironic, placement,
                                                                          reconciler, cli):
    # Earlier versions wrote CUSTOM_RPR_ADDED_<T> beside each trait T they added, and kept
    # any trait without a twin (here CUSTOM_STALE, which the node no longer has).
    nodes = [ironic.create(traits=["CUSTOM_GPU"]), ironic.create()]
    assert reconciler.run().converged
    put_traits(placement, nodes[0], {"CUSTOM_GPU", "CUSTOM_RPR_ADDED_CUSTOM_GPU", MANAGED,
                                     "CUSTOM_STALE", "CUSTOM_RPR_ADDED_CUSTOM_GONE"})
    put_traits(placement, nodes[1], {MANAGED, "CUSTOM_STALE", "COMPUTE_NODE"})
    code, out, err = cli("reconcile", "-f", "json")  # a new process, as an upgrade runs it
    (row,) = json.loads(out)
    assert code == 0 and row["updated"] == 2, (out, err)
    assert placement.provider(nodes[0])["traits"] == {"CUSTOM_GPU", MANAGED}
    assert placement.provider(nodes[1])["traits"] == {MANAGED, "COMPUTE_NODE"}
    code, out, _ = cli("reconcile", "-f", "json")
    (row,) = json.loads(out)
    assert code == 0 and row["unchanged"] == 2 and set(row["placement_requests"]) == {"GET"}


ABSENT_FOR = 1.0  # [reconcile] interval, shortened: how long an absence must last


def second_pass_later(reconciler, **kwargs):
    """Another pass, an interval after the last one (absences need two)."""
    time.sleep(ABSENT_FOR)
    return reconciler.run(**kwargs)


def test_node_deleted_in_ironic_loses_its_provider_after_two_passes(ironic, placement,
                                                                    reconciler):
    reconciler.absent_for = ABSENT_FOR
    keep, gone = ironic.create_many(2)
    assert reconciler.run().converged
    ironic.delete(gone)
    summary = reconciler.run()
    assert outcome_of(summary, gone).outcome is Outcome.KEPT  # seen absent once: not proof
    assert "absent from Ironic's listing since" in outcome_of(summary, gone).reason
    assert placement.provider(gone) is not None
    summary = second_pass_later(reconciler)
    assert outcome_of(summary, gone).outcome is Outcome.DELETED and summary.converged
    assert placement.provider(gone) is None
    assert placement.provider(keep) is not None


def test_a_mass_disappearance_is_refused_unless_allowed(ironic, placement, reconciler):
    reconciler.absent_for = ABSENT_FOR
    nodes = ironic.create_many(100, state="enroll")
    assert reconciler.run().converged
    vanished = nodes[:5]
    for node in vanished:
        ironic.delete(node)
    reconciler.run()
    summary = second_pass_later(reconciler)
    assert not summary.converged and "5 of 100" in summary.deletion_refused
    assert all(placement.provider(n) is not None for n in vanished)
    summary = second_pass_later(reconciler, allow_mass_deletion=True)
    assert summary.converged and summary.outcomes[Outcome.DELETED] == 5
    assert all(placement.provider(n) is None for n in vanished)
    assert all(placement.provider(n) is not None for n in nodes[5:])


@pytest.mark.every_release
def test_deleted_node_with_allocation_keeps_its_provider(ironic, placement, reconciler):
    reconciler.absent_for = ABSENT_FOR
    node = ironic.create()
    assert reconciler.run().converged
    consumer = placement.allocate(node, GOLD)
    ironic.delete(node)
    reconciler.run()
    summary = second_pass_later(reconciler)
    assert outcome_of(summary, node).outcome is Outcome.KEPT
    assert "allocations" in outcome_of(summary, node).reason
    assert placement.provider(node)["inventories"] == {GOLD: (1, 0, 1)}
    placement.deallocate(consumer)
    summary = reconciler.run()
    assert outcome_of(summary, node).outcome is Outcome.DELETED
    assert placement.provider(node) is None


@pytest.mark.every_release
def test_class_change_under_allocation_keeps_old_class_until_freed(ironic, placement,
                                                                   reconciler):
    node = ironic.create()
    assert reconciler.run().converged
    consumer = placement.allocate(node, GOLD)  # claimed by the scheduler, not yet deployed
    ironic.patch(node, resource_class="baremetal-silver")
    summary = reconciler.run()
    assert summary.converged
    assert placement.provider(node)["inventories"] == {
        GOLD: (1, 1, 1), "CUSTOM_BAREMETAL_SILVER": (1, 0, 1)}
    placement.deallocate(consumer)
    assert reconciler.run().converged
    assert placement.provider(node)["inventories"] == {"CUSTOM_BAREMETAL_SILVER": (1, 0, 1)}


def test_foreign_writer_between_read_and_write_still_converges(ironic, placement, reconciler):
    node = ironic.create()
    assert reconciler.run().converged
    ironic.set_maintenance(node, True)
    client = reconciler.provider_sync.placement
    real_set_inventories = client.set_inventories
    bumped = []

    def racing_set_inventories(uuid, generation, inventories):
        if not bumped:  # a real concurrent writer gets in first, once
            put_traits(placement, uuid, placement.provider(uuid)["traits"] | {
                "COMPUTE_STATUS_DISABLED"})  # as nova's resource tracker would
            bumped.append(uuid)
        return real_set_inventories(uuid, generation, inventories)

    client.set_inventories = racing_set_inventories
    summary = reconciler.run()
    result = outcome_of(summary, node)
    assert result.outcome is Outcome.UPDATED and result.attempts == 2
    state = placement.provider(node)
    assert state["inventories"] == {GOLD: (1, 1, 1)}
    assert "COMPUTE_STATUS_DISABLED" in state["traits"]  # nobody's write was lost


def test_existing_unmarked_provider_is_adopted(ironic, placement, reconciler):
    node = ironic.create()
    # As nova's own driver would have left it: same uuid and name, no marker.
    placement._call("POST", "/resource_providers", json={"uuid": node, "name": node})
    summary = reconciler.run()
    assert summary.converged
    assert outcome_of(summary, node).outcome is Outcome.UPDATED  # adopted, not created
    state = placement.provider(node)
    assert state["inventories"] == {GOLD: (1, 0, 1)} and MANAGED in state["traits"]


@pytest.mark.every_release
def test_new_providers_get_their_inventories_in_bulk(ironic, placement, reconciler):
    nodes = ironic.create_many(12, state="enroll")
    reconciler.bulk_batch = 5
    summary = reconciler.run()
    assert summary.converged and summary.outcomes[Outcome.CREATED] == 12
    # 12 creations + 3 reshaper batches; traits one PUT each (+ one-time names),
    # and no inventory PUT per provider.
    assert summary.requests["POST"] == 12 + 3
    assert summary.requests["PUT"] <= 12 + 3
    for node in nodes:  # enrolled nodes: offered, reserved
        assert placement.provider(node)["inventories"] == {GOLD: (1, 1, 1)}
    # The cache knows each generation after the bulk write: the next pass reads only
    # what is due for re-verification.
    expected = next_pass_reads(reconciler, nodes)
    assert reconciler.run().requests == expected


def test_bulk_batch_refused_for_a_foreign_write_goes_node_by_node(ironic, placement,
                                                                  reconciler):
    nodes = ironic.create_many(6, state="enroll")
    client = reconciler.provider_sync.placement
    real_reshape = client.reshape_inventories

    def racing_reshape(entries):
        put_traits(placement, nodes[2], placement.provider(nodes[2])["traits"] | {
            "COMPUTE_STATUS_DISABLED"})  # gets in just before the batch, as nova's RT would
        return real_reshape(entries)

    client.reshape_inventories = racing_reshape
    summary = reconciler.run()
    assert summary.converged and summary.outcomes[Outcome.CREATED] == 6  # finished per node
    for node in nodes:
        state = placement.provider(node)
        assert state["inventories"] == {GOLD: (1, 1, 1)} and MANAGED in state["traits"]
    assert "COMPUTE_STATUS_DISABLED" in placement.provider(nodes[2])["traits"]  # not lost


@pytest.mark.every_release
def test_odd_node_records_cost_only_that_node(ironic, placement, reconciler):
    good = ironic.create()
    real_iter = reconciler.ironic.iter_nodes
    reconciler.ironic.iter_nodes = lambda *fields: list(real_iter(*fields)) + [
        {"uuid": "not-a-uuid"}, "garbage", {"uuid": good.replace("a", "b"), "maintenance": "x"}]
    summary = reconciler.run()
    assert summary.converged
    assert summary.outcomes[Outcome.SKIPPED] == 3
    assert placement.provider(good)["inventories"] == {GOLD: (1, 0, 1)}


def test_placement_restart_mid_run_then_next_run_converges(stack, ironic, placement,
                                                           reconciler):
    nodes = ironic.create_many(120, state="enroll")
    reconciler.workers = 2  # slow enough that the restart lands mid-run
    outcome = {}
    run = threading.Thread(target=lambda: outcome.setdefault("summary", reconciler.run()))
    run.start()
    time.sleep(0.5)
    stack.restart("placement")
    run.join(120)
    first = outcome["summary"]
    assert first.nodes == 120
    assert set(first.failures) <= set(nodes)  # finished, or named each node that failed
    second = reconciler.run()
    assert second.converged, second.failures
    for node in nodes[:: 10]:
        assert placement.provider(node)["inventories"] == {GOLD: (1, 1, 1)}
    expected = next_pass_reads(reconciler, nodes)
    assert reconciler.run().requests == expected


def test_dry_run_shows_the_plan_and_writes_nothing(ironic, placement, cli):
    node = ironic.create(traits=["CUSTOM_GPU"])
    code, out, _ = cli("reconcile", "--dry-run", "-f", "json")
    assert code == 0
    (row,) = json.loads(out)
    assert row["node"] == node and row["operation"] == "create traits inventories"
    assert row["inventory_after"] == f"{GOLD}:reserved=0/total=1"
    assert "CUSTOM_GPU" in row["traits_after"]
    assert placement.provider(node) is None


def test_cli_summary_and_exit_codes(ironic, cli, tmp_path):
    ironic.create_many(2)
    ironic.create(resource_class=None)
    code, out, err = cli("reconcile", "-f", "json")
    (row,) = json.loads(out)
    assert code == 0
    assert "has no resource_class" in err  # the skip is logged, naming the node
    assert (row["nodes"], row["created"], row["skipped"]) == (3, 2, 1)
    assert row["skipped_reasons"] == {"node has no resource_class": 1}
    assert row["placement_requests"]["POST"] == 2 + 1  # two creations, inventories in bulk
    assert row["seconds"] > 0

    bad = tmp_path / "bad.conf"
    bad.write_text("[placement]\nauth_type = none\n")
    code, out, err = cli("reconcile", config_file=str(bad))
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "rp-reporter: error: bad configuration: [ironic] needs auth_type "
        "(e.g. password, admin_token, none) or endpoint_override"]


def test_cli_exits_1_naming_the_failed_nodes_when_placement_is_down(ironic, stack, tmp_path,
                                                                    cli):
    ironic.create()
    conf = tmp_path / "down.conf"
    conf.write_text(stack.reporter_conf(
        ironic={"shard": ironic.shard},
        placement={"endpoint": "http://127.0.0.1:9", "request_attempts": 2}))
    code, out, err = cli("reconcile", config_file=str(conf))
    assert code == 1 and out == ""
    assert "Traceback" not in err and "Unable to establish connection" in err
