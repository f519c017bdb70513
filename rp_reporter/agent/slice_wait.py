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

"""A member's wait for the lister's slice before its pass.

With ``[reconcile] share_listing`` one member lists for the ring and the others
run their passes on the slices it casts them (``listing_bus.py``, where
``Sharing.slice`` decides how long to wait).  The lister lists at once after a
start and after a ring change, so those are when a member expects its slice at
once; otherwise it takes the slice that woke it, or lists by itself.
"""


class SliceWait:
    def __init__(self, ownership, stopping, resync_now):
        self.ownership = ownership
        self.stopping = stopping  # threading.Event: no wait once set
        self.resync_now = resync_now  # threading.Event: the loop's wake-up
        self._expected = True  # the lister lists at a start and a ring change

    def ring_changed(self):
        """The ring changed: a resync now, expecting the slice the lister makes at once."""
        self._expected = True
        self.resync_now.set()

    def listing_for_pass(self, sharing):
        """The lister's slice for this pass, or None: list by myself (``Sharing.slice``
        decides; None as well without ``sharing``)."""
        expected, self._expected = self._expected, False
        if sharing is None:
            return None
        ring = self.ownership.ring
        listing = sharing.slice(expected, self.stopping, self.resync_now)
        if listing is not None:
            # A slice on the ring seen now serves a ring change that came while waiting,
            # and its arrival's wake-up is used up by this pass: without this a member
            # ran a second pass at once, waiting for a listing the lister makes only at
            # its interval (seen: agents started together each then listed by itself).
            self._expected = False
            self.resync_now.clear()
            if self.ownership.ring is not ring:  # changed meanwhile after all
                self._expected = True
                self.resync_now.set()
        return listing
