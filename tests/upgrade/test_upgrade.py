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

"""The upgrade, in the order an operator runs it (the tests run in file order, each on
what the one before left):

1. rp_reporter's previous release replaced by this one, one process at a time (the
   agents, then each nova-compute restarted on the new driver), old and new sharing
   one group and one bus meanwhile;
2. the control plane from 2025.1 to 2026.1 (tools/localstack/upgrade.py) while the
   agents and nova-compute 31 run and a user boots servers in a loop;
3. each nova-compute in turn, as the operator guide says: a reboot and a delete asked
   on its servers, the service disabled (no new build) and held in its group
   (``rp-reporter compute-group hold``), stopped once none of its servers has a task in
   progress, nova 33 and the driver installed into a new environment, started, enabled,
   released;
4. the online data migrations and ``nova-status upgrade check``.

After every step nothing may be lost and each process runs what it was started to run:
``Upgrade.step`` (conftest.py) records the baseline's servers, records, providers and
allocations, the user's actions and boots, and what each process runs, read from it;
``kept_everything`` asserts them.
"""

import importlib.metadata
import signal
import time

import pytest
from packaging import version as packaging_version

from tests.functional.agents import operator_cli
from tests.upgrade.conftest import AGENTS
from tests.upgrade.conftest import FROM
from tests.upgrade.conftest import GROUP
from tests.upgrade.conftest import HOSTS
from tests.upgrade.conftest import LEASE
from tests.upgrade.conftest import PREVIOUS
from tests.upgrade.conftest import SERVICE_DOWN
from tests.upgrade.conftest import SETTLE
from tests.upgrade.conftest import TO
from tests.upgrade.conftest import UNSCHEDULABLE_BOUND
from tests.upgrade.conftest import install_nova_compute
from tests.upgrade.conftest import previous_version
from tests.upgrade.traffic import BootLoop
from tools.localstack import releases
from tools.localstack import upgrade
from tools.wait import wait_for

pytestmark = [pytest.mark.functional,
              pytest.mark.skipif(releases.current().name != FROM,
                                 reason=f"the upgrade starts on {FROM} (tox -e upgrade)")]
ZERO = ("servers_lost", "moved", "moved_twice", "stuck_task_states", "records_deleted",
        "providers_deleted", "allocations_not_on_node", "user_actions_lost")


def kept_everything(up):
    """The last step lost nothing (every ZERO key 0, no service fenced, no server
    re-homed, no boot of the user's failed or refused, no free node unoffered for
    longer than UNSCHEDULABLE_BOUND), and every process runs what it was started to."""
    entry = up.steps[-1]
    assert {key: entry[key] for key in ZERO} == dict.fromkeys(ZERO, 0), entry
    assert entry["fenced"] == [] and entry["servers_rehomed"] == [], entry
    assert entry["boots_failed"] == [] and entry["boots_refused"] == [], entry
    assert entry["longest_unschedulable_s"] < UNSCHEDULABLE_BOUND, entry
    assert entry["running"] == up.meant(entry["running"]), entry["running"]


def compute_group(up, *args):
    """``rp-reporter compute-group ARGS``, as an operator runs it."""
    return operator_cli(up.stack, "compute-group", *args)


def replace_agent(up, name):
    with up.step(f"rp_reporter agent {name}"):
        up.agents[name].stop()
        up.start_agent(name)
    kept_everything(up)


def replace_in_nova_compute(up, host):
    """The driver of this release in nova-compute ``host``, after a reboot asked on one
    of its servers (the stop waits for it: Upgrade.stop_when_idle)."""
    with up.step(f"rp_reporter in nova-compute {host}") as asked:
        server = up.on(host)[0]
        asked.append(("reboot", server, up.nova.reboot(server)))
        up.stop_when_idle(host)
        up.start_compute(host)
    kept_everything(up)


@pytest.mark.every_release
def test_rp_reporter_beside_its_previous_release(up):
    """One agent and one nova-compute replaced: the previous release's and this one's
    share the agents' group, the services' group and the bus (CI's part of the suite)."""
    up.results["previous_rp_reporter"] = PREVIOUS
    # pbr's version of today's tree (the one the new processes run) is above the
    # previous release's: pip, dpkg and rpm upgrade it, reno tells the two apart.
    previous, new = previous_version(up.previous), importlib.metadata.version("rp_reporter")
    up.results["versions"] = {"previous": previous, "new": new}
    assert packaging_version.Version(previous) < packaging_version.Version(new)
    before = up.running()
    assert before == up.meant(before) and set(before["rp_reporter"].values()) == {
        "previous"}, before
    replace_agent(up, AGENTS[0])
    replace_in_nova_compute(up, HOSTS[0])


@pytest.mark.every_release
def test_an_action_counts_by_its_own_request(up):
    """The step's reboot counts by its own request: the server's earlier requests (its
    create), though it was rebooted since, are not a reboot carried out."""
    kind, server, request = next(a for step in up.steps for a in step["asked"])
    assert kind == "reboot" and up.carried_out(kind, server, request)
    create = next(a for a in up.nova._call("GET", f"/servers/{server}/os-instance-actions")[
        "instanceActions"] if a["action"] == "create")
    assert not up.carried_out("reboot", server, create["request_id"])


def test_rp_reporter_replaced_one_process_at_a_time(up):
    for name in AGENTS[1:]:
        replace_agent(up, name)
    for host in HOSTS[1:]:
        replace_in_nova_compute(up, host)


def test_control_plane_to_2026_1_under_a_boot_loop(up):
    up.loop = BootLoop(up)
    with up.step(f"control plane to {TO}"):
        up.results["control_plane_down_s"] = upgrade.control_plane(up.stack, TO)
        up.control_release = TO
    kept_everything(up)


def test_each_nova_compute_held_stopped_upgraded_and_started(up, tmp_path_factory):
    for host in HOSTS:
        with up.step(f"nova-compute {host} to nova 33") as asked:
            rebooted, deleted = up.on(host)[:2]
            asked += [("reboot", rebooted, up.nova.reboot(rebooted)),
                      ("delete", deleted, up.nova.delete(deleted))]
            up.disable(host)
            compute_group(up, "hold", GROUP, host, "--minutes", "30")
            up.stop_when_idle(host)
            venv = str(tmp_path_factory.mktemp(f"nova-compute-{host}") / "venv")
            bin_dir = install_nova_compute(venv, TO)
            # down for nova and gone from the ring before it comes back: only the hold
            # keeps the others from moving its servers
            wait_for(lambda h=host: not up.nova.compute_up(h), 3 * SERVICE_DOWN,
                     f"{host} down for nova")
            time.sleep(LEASE)  # and its membership's lease run out
            up.start_compute(host, bin_dir=bin_dir, release=TO)
            up.disable(host, False)
            compute_group(up, "release", GROUP, host)
        kept_everything(up)


def test_online_migrations_and_novas_own_check(up):
    with up.step("online data migrations"):
        code, output = upgrade.finish(up.stack)
        up.loop.stop()
    up.results["nova_status"] = {"exit_code": code, "output": output[-2000:]}
    up.results["boots"] = {"done": up.loop.done, "failed": len(up.loop.failed)}
    kept_everything(up)
    assert code in (0, 1), output  # 1: a warning nova-status itself lets pass


def test_the_checks_see_a_refused_boot_a_failed_one_and_a_node_unoffered(up):
    """What kept_everything asserts absent, staged once and seen: a boot the API
    refuses (a flavor that does not exist), one that ends in ERROR (a flavor of a class
    no node has: no valid host), and a free node unoffered past UNSCHEDULABLE_BOUND (an
    allocation of nobody's on its provider, then removed); kept in the results apart
    from the upgrade's steps."""
    flavor = up.nova.flavor("bm-upgrade-nowhere", "CUSTOM_BAREMETAL_NOWHERE")
    up.loop = loop = BootLoop(up, ["no-such-flavor", flavor])
    with up.step("staged: a boot refused, a boot failed, a node unoffered"):
        node = sorted(up.sampler.free - up.sampler.resting)[0]
        consumer = up.placement.allocate(node, up.resource_class)
        wait_for(lambda: loop.refused and loop.failed, SETTLE, "a refusal and a failure")
        wait_for(lambda: up.sampler.longest > UNSCHEDULABLE_BOUND, 2 * UNSCHEDULABLE_BOUND,
                 "the node unoffered past the bound")
        up.placement.deallocate(consumer)
        loop.stop()
    entry = up.steps.pop()
    up.results["checks_seen"] = entry
    assert entry["boots_refused"] and entry["boots_failed"], entry
    assert entry["longest_unschedulable_node"] == node, entry
    assert entry["longest_unschedulable_s"] > UNSCHEDULABLE_BOUND, entry


def test_a_service_stopped_without_its_hold_is_seen_moved(up):
    """The checks see what the upgrade's hold prevents: a nova-compute killed with
    neither disable nor hold is fenced by another and its servers re-homed, which the
    step finds in the mover's own log and in the servers' homes (kept in the results
    apart from the upgrade's steps).  The last host's: its log comes last, after the
    movers' (the old reading kept the tail of the logs joined)."""
    host = HOSTS[-1]
    servers = up.on(host)
    with up.step(f"{host} killed without its hold"):
        up.stack.service(f"nova-compute-{host}").signal(signal.SIGKILL)
        wait_for(lambda: not set(servers) & set(up.on(host)), 3 * SETTLE,
                 f"{host}'s servers re-homed")
    entry = up.steps.pop()
    up.results["a_move_seen"] = entry
    assert entry["moved"] == len(servers) and entry["fenced"] == [host], entry
    assert entry["servers_rehomed"] == sorted(servers), entry
    assert entry["running"]["releases"][f"nova-compute-{host}"] is False, entry["running"]
