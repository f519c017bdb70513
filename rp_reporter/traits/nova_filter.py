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

"""nova's ComputeCapabilitiesFilter on an Ironic node, read as nova reads it.  Pure.

* ``parse_capabilities`` reads a node's ``properties/capabilities`` exactly as nova's
  Ironic driver does (``nova/virt/ironic/driver.py``, ``_node_resource``), and
  ``host_stats`` is what the filter then sees of the node;
* ``match_spec`` is ``extra_specs_ops.match`` (``nova/scheduler/filters/extra_specs_ops.py``);
* ``capabilities_match`` is the filter on one node (``nova/scheduler/filters/
  compute_capabilities_filter.py``).
"""

import operator

# nova's HostState attributes: a spec naming one of them is read from the attribute, not
# from the node's capabilities (nova/scheduler/host_manager.py), so no trait stands for it.
HOST_STATE_ATTRS = frozenset((
    "aggregates", "allocation_candidates", "cell_uuid", "cpu_allocation_ratio", "cpu_info",
    "disk_allocation_ratio", "disk_mb_used", "failed_builds", "free_disk_mb", "free_ram_mb",
    "host", "host_ip", "hypervisor_hostname", "hypervisor_type", "hypervisor_version",
    "instances", "limits", "metrics", "nodename", "num_instances", "num_io_ops",
    "numa_topology", "pci_stats", "ram_allocation_ratio", "supported_instances",
    "total_usable_disk_gb", "total_usable_ram_mb", "updated", "uuid", "vcpus_total",
    "vcpus_used"))

# The filter's operators (nova/scheduler/filters/extra_specs_ops.py).
OPS = {
    "=": lambda x, y: float(x) >= float(y),
    "<in>": lambda x, y: y in x,
    "<all-in>": lambda x, y: all(val in x for val in y),
    "==": lambda x, y: float(x) == float(y),
    "!=": lambda x, y: float(x) != float(y),
    ">=": lambda x, y: float(x) >= float(y),
    "<=": lambda x, y: float(x) <= float(y),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


def parse_capabilities(value):
    """(key -> value, malformed pieces), as nova's Ironic driver reads ``capabilities``.

    Nova: ``str(value).split(',')``; each piece must split on ``:`` into exactly two
    non-empty parts, the key is stripped (the value is not), a later key wins; any
    other piece is malformed and skipped.  A false value (None, "", {}) is no
    capabilities.  Nova stringifies anything else, and so do we.
    """
    caps, malformed = {}, []
    if not value:
        return caps, malformed
    for piece in str(value).split(","):
        parts = piece.split(":")
        if len(parts) == 2 and parts[0] and parts[1]:
            caps[parts[0].strip()] = parts[1]
        else:
            malformed.append(piece)
    return caps, malformed


def node_properties(properties):
    """A node's ``properties`` when it is a mapping, else an empty one."""
    return properties if isinstance(properties, dict) else {}


def host_stats(properties):
    """What nova's filter sees of an Ironic node: ``cpu_arch`` from the properties,
    then every capability (a capability named cpu_arch wins, as in nova)."""
    props = node_properties(properties)
    stats = {"cpu_arch": props.get("cpu_arch")}
    stats.update(parse_capabilities(props.get("capabilities"))[0])
    return stats


def match_spec(value, req):
    """nova's ``extra_specs_ops.match(value, req)``; where nova would raise (a bare
    ``<or>``, a number that is not one), no match."""
    words = req.split()
    op = method = None
    if words:
        op = words.pop(0)
        method = OPS.get(op)
    if op != "<or>" and not method:
        return value == req
    if value is None:
        return False
    try:
        if op == "<or>":
            while True:
                if words.pop(0) == value:
                    return True
                if not words:
                    break
                words.pop(0)
                if not words:
                    break
            return False
        if words:
            if op == "<all-in>":
                return method(value, words)
            return method(value, words[0])
    except (IndexError, ValueError, TypeError, OverflowError):
        return False
    return False


def spec_scope(key):
    """The filter's reading of a spec key: None (ignored), or the capability key path."""
    scope = key.split(":")
    if len(scope) == 1:
        return scope
    return scope[1:] if scope[0] == "capabilities" else None


def capabilities_match(extra_specs, properties):
    """Whether nova's ComputeCapabilitiesFilter passes this Ironic node for these specs.

    The node's host state is what nova's Ironic driver reports: ``cpu_arch`` and the
    parsed capabilities.  Unscoped keys count only where the node has them; keys
    deeper than ``capabilities:<key>`` and ``hw:maxphysaddr_bits`` never match an
    Ironic node (its cpu_info is None and no capability value is JSON with keys).
    HostState attributes (``host``, ``free_ram_mb``, ...) are not modelled.
    """
    stats = host_stats(properties)
    for key, req in (extra_specs or {}).items():
        if key == "hw:maxphysaddr_bits":
            return False
        scope = spec_scope(key)
        if scope is None:
            continue
        if len(scope) == 1 and ":" not in key and scope[0] not in stats:
            continue
        if len(scope) != 1:
            return False
        cap = stats.get(scope[0])
        if cap is None or not match_spec(str(cap), str(req)):
            return False
    return True
