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

"""One node's derived traits, written to Ironic: the step the CLI and the agent share.

Ironic's node traits are the truth (nova hands a flavor's required traits to
Ironic, which refuses a deploy on a node that lacks one), so the derived traits
go on the Ironic node; reconcile and the fast path then carry them to Placement.

Writes are per trait (``PUT``/``DELETE /v1/nodes/{n}/traits/{t}``), so an
operator's concurrent edit of other traits is never clobbered.  What this tool
added is recorded in the node's ``extra/rp_reporter_derived_traits`` and only
those are ever removed.  The order loses nothing to a crash at any point:

1. the record grows first, to hold the traits about to be added (a crash after
   it leaves recorded traits the node lacks: the next run adds them or, no longer
   derived, drops them from the record; it never leaves a trait we added
   unrecorded, which would then stay forever as if set by hand);
2. the traits are added, then the stale ones removed;
3. the record shrinks last, once those are gone (a crash before leaves removed
   traits recorded: the next run drops them from the record).
"""

from rp_reporter import tenancy as tenancy_names
from rp_reporter import traits
from rp_reporter.sync import ironic as ironic_sync

# What a node record needs beside Ironic's usual fields (iter_nodes / get_node extra_fields).
FIELDS = ironic_sync.TRAIT_FIELDS


class NodeTraits:
    """Plan and apply one node's derived traits with these rules (None: none) and,
    with ``tenancy`` (sync.tenant_aggregates.NodeTenancy), the public trait."""

    def __init__(self, ironic, rules, tenancy=None):
        self.ironic = ironic
        self.rules = rules
        self.tenancy = tenancy

    def derived(self, record):
        found = (traits.derive_traits(self.rules, record.get("properties"))
                 if self.rules is not None else frozenset())
        if self.tenancy is not None:
            found |= self.tenancy.derived_traits(record)
        return found

    def problems(self, record):
        """What the rules skipped on this node (one line each)."""
        if self.rules is None:
            return []
        return traits.derive_problems(self.rules, record.get("properties"))

    def plan(self, record):
        """The changes for a node record (uuid, traits, properties, extra): pure."""
        current = frozenset(t for t in (record.get("traits") or ()) if isinstance(t, str))
        recorded = traits.recorded_traits(record.get("extra"))
        # The public trait is tenancy's alone, however it got there: one set by hand
        # on a claimed node would let every project in.
        owned = {tenancy_names.PUBLIC_TRAIT} if self.tenancy is not None else ()
        return traits.trait_changes(current, recorded, self.derived(record), owned)

    def apply(self, record, dry_run=False):
        """Make the node carry its derived traits; returns what it changed (or, with
        dry_run, would change).  Raises errors.ServiceError on the first failed write."""
        changes = self.plan(record)
        if dry_run or not changes.changed:
            return changes
        uuid = record["uuid"]
        grown = changes.previous | changes.add
        if grown != changes.previous:
            self.ironic.record_derived_traits(uuid, grown)
        for trait in sorted(changes.add):
            self.ironic.add_trait(uuid, trait)
        for trait in sorted(changes.remove):
            self.ironic.remove_trait(uuid, trait)
        if changes.recorded != grown:
            self.ironic.record_derived_traits(uuid, changes.recorded)
        return changes
