"""Which compute services are fenced, and which of their nodes a survivor moves.  Pure.

With ``peers_from = coordination`` every nova-compute of a group is a member of
rp_reporter's coordination group, and the ring over the live members says which
free node each one manages (nova's own ``_refresh_cache`` applies it).  A node
with an instance stays with the service that holds the instance, as in nova; if
that service dies, its instances can be neither rebooted nor deleted until the
node is re-homed, which is what nova's ``nova-manage db
ironic_compute_node_move`` does by hand.  Here a survivor does it, one node at a
time, once the dead service is fenced *twice over*:

* its coordination lease has expired (it is no live member of the group), and
* nova itself reports it down (its servicegroup: no report for
  ``service_down_time``, or forced down).

Lease loss alone is never enough: a service cut off from the coordination
backend while nova still sees it up is partitioned, not dead, and its servers
are still served by it.  Each node is moved by its ring owner among the live
members only, so one survivor moves it; the steps are idempotent and found
again from the instances on fenced services, so a mover that dies half-way is
finished by the next owner's periodic.
"""

import collections


def fenced_services(up_by_service, live_members, me):
    """Hosts of the compute services that are fenced, sorted.

    ``up_by_service``: {host: whether nova's servicegroup reports it up (forced
    down counts as down)}; ``live_members``: the coordination group's live
    members; ``me``: this service's host (never fenced by itself).
    """
    live = {m.lower() for m in live_members}
    return sorted(host for host, up in up_by_service.items()
                  if not up and host.lower() not in live and host.lower() != me.lower())


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
