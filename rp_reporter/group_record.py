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

"""Who was ever a member of the compute services' group, and whom a mover forced down.

Live membership is a lease, gone with a lease's end.  What a mover may fence must
outlive it: only a service that was a member of this group is ever forced down by it,
never a stock nova-compute or one of another group sharing the cell (forced down, the
scheduler skips it after it recovers and its deletes become local deletes that leave
Ironic nodes deployed).  And a service that comes back clears only a forced-down flag
a mover set, never an operator's or an evacuation tool's.

Both live in the coordination backend, beside the membership, as durable names (tooz
groups nobody joins: no lease ends them), never in nova's API database: a compute
service reaches that only through an upcall, which nova's superconductor layout (cell
conductors without ``[api_database]``) refuses.  The names::

    <group>:rp_reporter.record.v1:member:<host>             ever a member
    <group>:rp_reporter.record.v1:forced-down:<host>@<mover>  <mover> forced <host> down
    <group>:rp_reporter.record.v1:held:<host>@<until>          not fenced until <until>
    <group>:rp_reporter.record.v1:queued:<host>@<node>@<server>  a build cast to <host>
    <group>:rp_reporter.record.v1:epoch:<random>                the record's life

``v1`` is the format's version: a later one reads these and writes its own beside
them; each kind is read by its own prefix, so a release reads none of a kind it does
not know (``held`` and ``queued`` are newer than the other two: a mover of an older
release does not honour them). ``queued`` is the durable intent of ending a build cast
to a service that left before it took it (``queued_builds``): recorded by the survivor
that took the build's node over, before anything is done with it, and erased only once
the build is settled, so no failed round and no survivor's restart strands it.
``<until>`` is seconds since the epoch (UTC), an operator's bound for a service down
on purpose (an upgrade, a reboot), read by each mover's clock. Hosts are lower-case,
as nova compares them. A backend that loses its data loses the record too (a new
``epoch`` says so): a member records itself again at its start and after every lapse
of its lease, each live member writes back the members it saw and, once it finds the
epoch changed, the movers' names it set and the holds it read whose bound is ahead
(``fencing``: a name dropped on purpose is never written back), and a service forced down
once no member that knew it lives stays down until an operator clears it (the one safe
direction).
"""

import uuid

FORMAT = "rp_reporter.record.v1"


class GroupRecord:
    """The record of coordination group ``group`` in ``names``
    (``membership.DurableNames``)."""

    def __init__(self, group, names):
        self.names = names
        self._prefix = f"{group}:{FORMAT}:"

    def _member(self, host=""):
        return f"{self._prefix}member:{host.lower()}"

    def _forced(self, host="", mover=None):
        name = f"{self._prefix}forced-down:{host.lower()}"
        return name if mover is None else f"{name}@{mover.lower()}"

    def join(self, host):
        """Record ``host`` as a member (idempotent)."""
        self.names.add_name(self._member(host))

    def members(self):
        """Every host ever recorded (lower-case)."""
        return {name[len(self._member()):] for name in self.names.names(self._member())}

    def forced_down(self, host, mover):
        """``mover`` forces ``host`` down: recorded before the flag is set."""
        self.names.add_name(self._forced(host, mover))

    def movers(self):
        """{host: the mover that forced it down} for every host so recorded."""
        found = (name[len(self._forced()):].partition("@")
                 for name in self.names.names(self._forced()))
        return {host: mover for host, _, mover in found}

    def forced_down_by_mover(self, host):
        """The mover that forced ``host`` down, or None (not forced by a mover)."""
        return self.movers().get(host.lower())

    def write_back(self, seen, mine, forced):
        """What a live member knows that the backend lost (its data gone: a restart
        without persistence, a flush), written again: ``seen``, the members it saw live;
        ``mine``, the hosts it forced down, of which those ``forced`` ({host: whether
        nova has it forced down}) still says are (given only once the record's epoch
        says the data was lost: a mover's name dropped on purpose stays dropped).  So the
        record outlives the backend's data as long as one member that knew it lives.
        Returns (members, movers) as recorded now."""
        members, movers = self.members(), self.movers()
        for host in set(seen) - members:
            self.join(host)
        for host in mine:
            if forced.get(host) and host not in movers:
                self.forced_down(host, mine[host])
                movers[host] = mine[host].lower()
        return members | set(seen), movers

    def drop_lifted(self, forced, lifted_before, movers=None):
        """Drop the movers' names whose flag someone else (an operator) lifted, so that a
        flag set again later is never taken for the mover's.  ``forced``: {host: whether
        nova has it forced down}, for the hosts read now; ``lifted_before``: this
        function's answer at the previous read.  A mover sets its flag right after its
        name, so one read may fall between the two: a name goes once two reads in a
        row find its flag lifted.  Returns {host: mover} of the names found lifted now
        (``movers``: the names as just read, or None to read them)."""
        lifted = {host: mover for host, mover in (movers or self.movers()).items()
                  if host in forced and not forced[host]}
        for host, mover in lifted.items():
            if lifted_before.get(host) == mover:
                self.cleared(host)
        return lifted

    def _held(self, host=""):
        return f"{self._prefix}held:{host.lower()}"

    def hold(self, host, until):
        """Not fenced until ``until`` (seconds since the epoch): ``host`` is down on
        purpose (an upgrade), its servers stay.  Replaces an earlier hold."""
        self.release(host)
        self.names.add_name(f"{self._held(host)}@{int(until)}")

    def release(self, host):
        """``host``'s hold ends now."""
        for name in self.names.names(self._held(host) + "@"):
            self.names.remove_name(name)

    def holds(self):
        """{host: until} of every hold recorded, ended ones included (a name whose bound
        is not a number is no hold)."""
        return self._holds_in(self.names.names(self._held()))

    def _holds_in(self, names):
        """{host: until} of the holds among ``names`` (the others are left out)."""
        found = (name[len(self._held()):].partition("@")
                 for name in names if name.startswith(self._held()))
        return {host: int(until) for host, _, until in found if until.isdigit()}

    def _queued(self, host=""):
        return f"{self._prefix}queued:{host.lower()}"

    def _queued_build(self, host, node, server):
        return f"{self._queued(host)}@{node}@{server}"

    def queue(self, host, node, servers):
        """The builds of ``servers`` booked on ``node`` were cast to ``host``, which left
        before ``node`` was taken over (idempotent)."""
        for server in sorted(servers):
            self.names.add_name(self._queued_build(host, node, server))

    def queued(self):
        """{host: {node: servers}} of every build so recorded (one read)."""
        found = {}
        for name in self.names.names(self._queued()):
            host, _, rest = name[len(self._queued()):].partition("@")
            node, _, server = rest.partition("@")
            if server:
                found.setdefault(host, {}).setdefault(node, set()).add(server)
        return found

    def settled(self, host, done):
        """The builds ``done`` ({node: servers}) of ``host`` need nothing more."""
        for node, servers in done.items():
            for server in servers:
                self.names.remove_name(self._queued_build(host, node, server))

    def _epoch(self):
        return f"{self._prefix}epoch:"

    def holds_and_epoch(self):
        """({host: until} as ``holds``, the record's epoch) in one read.  The epoch is a
        name written once and gone only with the backend's data (a restart without
        persistence, a flush), then written anew: a member that finds another epoch
        than the one it knew knows that the record lost what it held, the holds
        included, which only the members that saw them can write back."""
        found = self.names.names(self._prefix)
        holds = self._holds_in(found)
        epochs = sorted(n[len(self._epoch()):] for n in found if n.startswith(self._epoch()))
        if epochs:
            return holds, epochs[0]
        epoch = uuid.uuid4().hex
        self.names.add_name(self._epoch() + epoch)
        return holds, epoch

    def forget(self, host):
        """``host`` was never a member (an operator's: decommissioned for good)."""
        self.cleared(host)
        self.release(host)
        self.names.remove_name(self._member(host))

    def cleared(self, host):
        """``host``'s forced-down flag was cleared (by it, or by an operator): the
        mover's name goes, so a flag set again later is never taken for a mover's."""
        for name in self.names.names(self._forced(host) + "@"):
            self.names.remove_name(name)
