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

"""Deployed nodes that nothing owns: the rule (no I/O).

A server deleted while its compute service is down is deleted locally in nova (stock
nova alike): nova's API marks it deleted and nobody tells Ironic, so its node stays
``active`` with the deleted server's uuid.  nova's own reaper of such nodes
(``running_deleted_instance_action``) runs only on the service that was the server's
host, which may never come back; and nova's evacuate does not cover Ironic.  A node is
orphaned when the server Ironic names on it is one that nova deleted more than a grace
period ago (nova's own reaper, on a host that is up, goes first); a node whose server
nova still has, or has no record of (another nova, an archived row), never is.
"""

import datetime


def orphaned(associated, instances, now, grace):
    """[(node, server, deleted_at)] of the orphaned nodes, by node.

    ``associated``: {node: the server Ironic names on it}; ``instances``: {server: when
    nova deleted it (a datetime, UTC), or None while nova has it}, the servers nova has a
    record of; ``now``: a datetime, UTC; ``grace``: seconds."""
    found = []
    for node, server in sorted(associated.items()):
        if server not in instances or instances[server] is None:
            continue
        deleted_at = instances[server].replace(tzinfo=None)
        if (now.replace(tzinfo=None) - deleted_at) >= datetime.timedelta(seconds=grace):
            found.append((node, server, deleted_at))
    return found
