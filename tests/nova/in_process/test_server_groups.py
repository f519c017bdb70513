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
"""A server's hard group policy kept at its build (``server_groups``) and checked by a
move, in nova's own cell database: nova's real Instance objects, saved as nova's build
saves them, and read back by the system metadata filter nova's database offers."""

import uuid

from nova import objects
from nova.compute import task_states
from nova.compute import vm_states

from rp_reporter.nova_compute import server_groups
from tests.nova.in_process.test_queued_builds import a_server


def a_group(policy, **rules):
    return objects.InstanceGroup(uuid=str(uuid.uuid4()), policy=policy, rules=rules)


def built_on(ctxt, host, group=None):
    """A server as nova's conductor made it, built on ``host`` in ``group``: this
    service's build check, then nova's first save of the build."""
    made = a_server(ctxt, host=host)
    server = objects.Instance.get_by_uuid(ctxt, made.uuid, expected_attrs=["system_metadata"])
    server_groups.remember(server, objects.RequestSpec(instance_group=group)
                           if group else objects.RequestSpec())
    server.vm_state, server.task_state = vm_states.ACTIVE, None
    server.save(expected_task_state=(task_states.SCHEDULING, None))
    return objects.Instance.get_by_uuid(ctxt, made.uuid, expected_attrs=["system_metadata"])


def test_anti_affinity_refuses_a_host_holding_as_many_members_as_its_rule_allows(cell):
    ctxt = cell
    group, two_a_host = a_group("anti-affinity"), a_group("anti-affinity",
                                                          max_server_per_host=2)
    first, second = built_on(ctxt, "dead", group), built_on(ctxt, "b", group)
    assert "has 1 on b already" in server_groups.refusal(ctxt, first, "b")
    assert server_groups.refusal(ctxt, first, "c") is None
    loose = built_on(ctxt, "dead", two_a_host)
    built_on(ctxt, "b", two_a_host)
    assert server_groups.refusal(ctxt, loose, "b") is None
    second.destroy()  # a deleted member holds no place
    assert server_groups.refusal(ctxt, first, "b") is None


def test_affinity_refuses_any_host_but_its_other_members(cell):
    """nova's evacuate of an affinity member fails while the others are elsewhere (the
    dead host): so does a move."""
    ctxt = cell
    group = a_group("affinity")
    first = built_on(ctxt, "dead", group)
    assert server_groups.refusal(ctxt, first, "b") is None  # alone in its group
    built_on(ctxt, "dead", group)
    assert "other members on ['dead']" in server_groups.refusal(ctxt, first, "b")


def test_soft_policies_and_no_group_are_not_kept_and_never_refuse(cell):
    ctxt = cell
    for group in (a_group("soft-anti-affinity"), a_group("soft-affinity"), None):
        first, _ = built_on(ctxt, "dead", group), built_on(ctxt, "b", group)
        assert server_groups.KEY not in first.system_metadata
        assert server_groups.refusal(ctxt, first, "b") is None
