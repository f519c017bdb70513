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

"""A server's hard group policy (affinity, anti-affinity), kept where a move reads it.

nova's evacuate refuses a destination that breaks the server's group policy (the late
check of ``ComputeManager._validate_instance_group_policy``).  nova reads the group
from the API database, an upcall a compute service makes only where its layout allows
it (``[workarounds] disable_group_policy_check_upcall``).  A move must respect the
policy in every layout, so the build on this service keeps the group's uuid, policy and
``max_server_per_host`` in the server's system metadata (nova's first save of the build
writes it), and a move reads the group's members from the cell's database by that
value.  A server built before this release, or by another driver, has none: a move
leaves its policy unchecked, as nova does in the superconductor layout.
"""

from nova import objects

KEY = "rp_reporter_server_group"
HARD = ("affinity", "anti-affinity")


def remember(instance, request_spec):
    """At the build: the hard policy of the group the request asks for, if any, in
    ``instance``'s system metadata (not saved here: nova's build saves it)."""
    if request_spec is None or not request_spec.obj_attr_is_set("instance_group"):
        return
    group = request_spec.instance_group
    if group is None or not group.obj_attr_is_set("uuid"):
        return
    policy = group.policy if group.obj_attr_is_set("policy") else None
    if policy not in HARD:
        return
    rules = group.rules or {}  # nova's property: {} when the group has none
    limit = int(rules.get("max_server_per_host", 1))
    instance.system_metadata[KEY] = f"{group.uuid} {policy} {limit}"


def refusal(ctxt, instance, host):
    """Why moving ``instance`` to compute service ``host`` breaks its group's hard
    policy (as nova's evacuate check would), or None."""
    value = (instance.system_metadata or {}).get(KEY)
    if not value:
        return None
    group, policy, limit = value.split()
    members = objects.InstanceList.get_by_filters(
        ctxt, {"system_metadata": {KEY: value}, "deleted": False},
        expected_attrs=["system_metadata"])
    hosts = [m.host for m in members
             if m.uuid != instance.uuid and m.system_metadata.get(KEY) == value and m.host]
    if policy == "anti-affinity" and hosts.count(host) >= int(limit):
        return (f"server group {group} (anti-affinity, at most {limit} a host) has "
                f"{hosts.count(host)} on {host} already")
    if policy == "affinity" and hosts and host not in hosts:
        return f"server group {group} (affinity) has its other members on {sorted(set(hosts))}"
    return None
