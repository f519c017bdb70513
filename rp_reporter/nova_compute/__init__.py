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

"""A drop-in nova-compute driver: nova's Ironic driver with rp_reporter's provider model.

    [DEFAULT]
    compute_driver = rp_reporter.IronicDriver   # nova.virt.rp_reporter (shims/nova/virt/)
    [rp_reporter]
    peers_from = nova          # or: coordination (the compute services' own group)
    config_file = /etc/rp_reporter/nova-compute.conf   # [coordination], [ring], [notifications]

``IronicDriver`` subclasses ``nova.virt.ironic.driver.IronicDriver``.  Where nova
is the reference it *is* nova: node ownership with ``peers_from = nova`` (the
default) is nova's own code, untouched (shard, conductor group, peer list and its
validation, the fallbacks for old Ironic API versions, the hash and the
partitions), so a fleet switched one compute service at a time never double-claims
or orphans a node.  Its parts:

* ``content``: ``update_provider_tree``, the provider from rp_reporter's model;
* ``coordinated_ring`` (``peers_from = coordination``): this service's membership
  in the compute services' group and the ring over its live members, applied to
  nova's node cache; ``provider_cache``: released nodes' providers out of the cache
  nova's resource tracker writes through, and out of its write-back (nova 31 to 33);
* ``periodic`` (``full_pass_every`` above 1): which nodes nova's resource-tracker
  periodic goes over, ``rp_reporter.tracker_passes``'s decision; ``node_listing``:
  nova's node refresh listing what changed, and ``deleted_nodes``: Ironic's
  notifications of deleted nodes for it;
* ``rehome``: the job that moves a fenced service's servers to live members, with
  ``claim`` (a mover's claim on a server), ``recovery`` (nova's start-up handling of
  each moved server), ``queued_builds`` (builds a fenced service never took, ended)
  and ``group_record`` (who was ever a member, whom a mover forced down); ``guard``,
  which drops a request, or refuses an operation, for a server no longer homed here;
  ``self_fence``: a service that may have been fenced restarts before it acts;
* ``options``: ``[rp_reporter]`` in nova.conf.

nova (31 to 34) loads ``compute_driver`` only from ``nova.virt`` (``'nova.virt.%s' %
compute_driver``): rp_reporter installs the one module ``nova/virt/rp_reporter.py``,
which re-exports ``IronicDriver``, and nova-compute loads it by its own command
with its own nova.conf; no wrapper command is needed.

This package is the only part of rp_reporter that imports nova.
"""

from rp_reporter.nova_compute.options import list_opts

__all__ = ["IronicDriver", "list_opts"]


def __getattr__(name):
    # The driver (and nova with it) is imported when nova's loader asks for it, not with
    # the package: oslo-config-generator reads list_opts where nova is not installed (a
    # packager makes the sample configuration without nova).
    if name == "IronicDriver":
        from rp_reporter.nova_compute.driver import IronicDriver
        return IronicDriver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
