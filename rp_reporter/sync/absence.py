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

"""Which managed providers may be deleted: absence proven, never inferred.  Pure.

Not seeing a node is no proof it is gone: Ironic hides nodes from scoped
credentials (a direct read is then a 404 too), and a wrong conductor group,
shard or endpoint shows a different fleet.  So a provider is deleted only when
its node is missing

* from a listing shown to hold every node in scope (``gap`` is None),
* in two passes at least ``min_age`` seconds apart, with no pass between
  them showing it (a pass that shows it forgets the absence),

and only while the pass is not deleting more than a small share of the
managed providers.  A mass disappearance, and above all one where Ironic
shows none of the nodes Placement holds, is refused whole and reported,
unless the operator says it is a real decommission (``allow_mass``).
"""

from __future__ import annotations

import dataclasses
import math

# Why a pass refused to delete: the metric label, and the start of the log line.
UNPROVEN, NONE_VISIBLE, MASS = "unproven_listing", "none_visible", "mass_disappearance"


@dataclasses.dataclass(frozen=True)
class Verdict:
    delete: tuple = ()  # uuids whose absence is proven: delete (if unallocated)
    waiting: dict = dataclasses.field(default_factory=dict)  # uuid -> first seen absent
    refused: str | None = None  # why nothing is deleted this pass (one line)
    reason: str | None = None  # UNPROVEN, NONE_VISIBLE or MASS

    def since(self, uuid):
        return self.waiting.get(uuid)


def allowed(managed, max_share):
    """How many providers one pass may delete: the share, and always one."""
    return max(1, math.floor(max_share * managed))


def judge(absent, present, seen_absent, now, min_age, max_share, gap=None, allow_mass=False,
          elsewhere=0):
    """The deletions a pass may make.

    absent: managed providers whose nodes the listing lacks (and a direct read
        did not find elsewhere);
    present: how many managed providers in scope the listing does show;
    seen_absent: {uuid: when first seen absent} carried from earlier passes;
    gap: None when the listing is shown complete, else why it may not be;
    elsewhere: managed providers whose nodes Ironic shows outside this scope
        (another shard or conductor group): not counted in the share, but
        proof that Ironic shows some of what Placement holds.
    """
    absent = sorted(set(absent))
    if not absent:
        return Verdict()
    if gap is not None:
        # An incomplete listing is no evidence: earlier absences are not carried.
        return Verdict(refused=f"{len(absent)} managed providers' nodes are not in Ironic's "
                               f"listing, but it is not shown complete: {gap}; deleting "
                               f"nothing", reason=UNPROVEN)
    waiting = {uuid: seen_absent.get(uuid, now) for uuid in absent}
    managed = present + len(absent)
    refused = reason = None
    if present + elsewhere == 0:
        refused, reason = (f"Ironic shows none of the {managed} nodes Placement holds managed "
                           f"providers for (scoped credentials, the wrong conductor group or "
                           f"shard, or the wrong Ironic endpoint?): deleting nothing"), NONE_VISIBLE
    elif len(absent) > allowed(managed, max_share):
        refused, reason = (f"{len(absent)} of {managed} managed providers' nodes vanished from "
                           f"Ironic's listing at once, over [reconcile] max_deletion_share "
                           f"({max_share:g}): deleting nothing"), MASS
    if refused and not allow_mass:
        return Verdict(waiting=waiting, refused=refused + "; if this is a real decommission, "
                       "run `rp-reporter reconcile --allow-mass-deletion`", reason=reason)
    delete = tuple(uuid for uuid in absent if now - waiting[uuid] >= min_age)
    return Verdict(delete=delete, waiting=waiting)
