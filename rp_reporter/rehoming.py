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

"""Which compute services are fenced, which of their nodes a survivor moves, and when a
driver refuses to act on a server.  Pure.

With ``peers_from = coordination`` every nova-compute of a group is a member of
rp_reporter's coordination group, and the ring over the live members says which
free node each one manages (nova's own ``_refresh_cache`` applies it).  A node
with an instance stays with the service that holds the instance, as in nova; if
that service dies, its instances can be neither rebooted nor deleted until the
node is re-homed, which is what nova's ``nova-manage db
ironic_compute_node_move`` does by hand.  Here a survivor does it, one node at a
time, once the dead service is fenced *twice over*:

* its coordination lease has expired (it is no live member of the group), and
* nova reports it down: forced down, or its reports to nova stopped for
  ``service_down_time`` as this service's own clock measures it (``ReportWatch``:
  a survivor whose wall clock is skewed would otherwise see every service down).

Lease loss alone is never enough: a service cut off from the coordination
backend while its reports to nova go on is partitioned, not dead, and its servers
are still served by it.  Before the first of its servers moves, the mover forces
the fenced service down (nova's own fence, which ``ironic_compute_node_move``
requires); each node is moved under a lock in the coordination backend by its
ring owner among the live members, after reading again that the server is still
homed on the fenced service, so a server moves once however the survivors' views
differ.  The steps are idempotent and found again from the instances on fenced
services, so a mover that dies half-way is finished by the next owner.

A service that resumes after a pause acts on no server moved meanwhile: before
each operation on a server the driver reads where it is homed (``refusal``).
"""

import collections


def fenced_services(up_by_service, live_members, me, held=frozenset()):
    """Hosts of the compute services that are fenced, sorted.

    ``up_by_service``: {host: whether nova's servicegroup reports it up (forced
    down counts as down)}; ``live_members``: the coordination group's live
    members; ``me``: this service's host (never fenced by itself); ``held``: hosts an
    operator holds down on purpose (an upgrade), never fenced while held.
    """
    spared = {m.lower() for m in live_members} | {h.lower() for h in held} | {me.lower()}
    return sorted(host for host, up in up_by_service.items()
                  if not up and host.lower() not in spared)


def hold_ends(holds, ends_before, now, monotonic_now):
    """{(host, until): its end on this mover's monotonic clock} of ``holds`` ({host:
    until, seconds since the epoch, by the operator's clock}).  A hold first read now
    ends ``until - now`` seconds from ``monotonic_now``; one read before keeps the end
    it was given then (``ends_before``): a step of this mover's wall clock after its
    first read (NTP, an operator's ``date``) neither ends nor lengthens it."""
    return {(host, until): ends_before.get((host, until), monotonic_now + until - now)
            for host, until in holds.items()}


def held_now(ends, monotonic_now):
    """The hosts whose hold (``ends``: as ``hold_ends`` gives them) has not ended at
    ``monotonic_now``."""
    return {host for (host, _), end in ends.items() if monotonic_now < end}


def nodes_to_move(instances, owns):
    """[(node, [instance, ...])] this service moves: nodes of the instances on fenced
    services (``instances``: (node, instance) pairs) that ``owns(node)``, in node order.

    A node holding more than one instance is left out: nova's
    ``ironic_compute_node_move`` refuses it too (a bare-metal node has one server;
    more means records an operator must reconcile first).  Returned apart by
    ``refused``.
    """
    by_node = {}
    for node, instance in instances:
        if node:  # an instance that never reached a node has nothing to move
            by_node.setdefault(node, []).append(instance)
    return [(node, held) for node, held in sorted(by_node.items())
            if owns(node) and len(held) == 1]


def refused(instances):
    """{node: how many instances} of the nodes holding more than one (never moved: see
    ``nodes_to_move``)."""
    counts = collections.Counter(node for node, _ in instances if node)
    return {node: n for node, n in sorted(counts.items()) if n > 1}


def taken_from_the_departed(claimed, members_before, members_now, ring_of):
    """{node: its owner before} of the nodes this service just ``claimed`` whose owner
    under the ring over ``members_before`` is no longer a member (``members_now``): the
    free nodes it took over from a service that left the group (dead, paused or cut
    off).  A build booked on such a node before it was claimed here was cast to that
    service (nova's scheduler sends a build to the host of the node's compute node
    record)."""
    if not members_before:
        return {}
    now = {m.lower() for m in members_now}
    ring = ring_of({m.lower() for m in members_before})
    taken = {}
    for node in sorted(claimed):
        before = [owner for owner in ring.get_nodes(node.encode()) if owner not in now]
        if before:
            taken[node] = before[0]
    return taken


def queued_build_step(instance):
    """What is left of a build booked on a node taken over from a service now fenced
    (``instance``: nova's, as read now): "end" (still BUILDING with no host: the service
    it was cast to never took it, and no one else did; nova's own start-up ends such
    builds on the service they were cast to, ``_error_out_instances_whose_build_was_
    interrupted``), "give back" (ended in ERROR with no host: its allocation is given
    back, again if it was not), or None (a service took it, or it is done)."""
    if instance.host:
        return None
    return {"building": "end", "error": "give back"}.get(instance.vm_state)


class ReportWatch:
    """Which compute services nova would report down, judged by this service's own
    monotonic clock: a service is down when its report (nova's ``report_count`` and
    ``updated_at``) has not changed for ``down_after`` seconds of watching it, or an
    operator or a mover forced it down.  nova's own answer (its wall clock against
    the record's timestamp) must agree, so a watcher that has not watched long enough
    never calls anyone down, and one whose wall clock runs ahead calls down no service
    whose reports go on."""

    def __init__(self, down_after):
        self.down_after = down_after
        self._since = {}  # host: (report, when it was first seen)

    def down(self, host, report, forced_down, nova_says_up, now):
        seen = self._since.get(host)
        if seen is None or seen[0] != report:
            self._since[host] = seen = (report, now)
        stalled = now - seen[1] >= self.down_after
        return forced_down or (stalled and not nova_says_up)


def refusal(homed_on, me, forced_down):
    """Why this service must not act on a server homed on ``homed_on`` (read just
    now), or None: it was moved away while this service could not see it (a pause,
    a partition), or this service is forced down (fenced by a mover)."""
    if homed_on is None or homed_on.lower() != me.lower():
        return f"the server is homed on {homed_on or 'no service'} now, not here"
    if forced_down:
        return "this compute service is forced down (fenced)"
    return None
