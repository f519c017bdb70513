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

"""Released nodes' providers out of nova's provider cache, and never written back.

The cache is the one nova's resource tracker writes through: the compute manager's
own report client (``ComputeManager.reportclient``), not the process's singleton.
It keeps each provider it wrote, generation included, after another service takes
the node over and writes it: back here, its first write met a 409 ("Failed to
update inventory", an ERROR line, then nova retried).  nova drops a provider the
same way when a rebalance takes an orphan compute node from it.

nova before 34 (2026.2) updates each node from a copy of the whole cache and writes
every provider of the copy back (``update_from_provider_tree``): a provider dropped
by a release while a node's update ran is then read again and written with the
copy's stale content, over what its new owner wrote.  There, the write-back runs
without the providers dropped since its copy was made, and a release that comes
while it runs is applied when it ends, so the membership renewals that release
nodes never wait for nova's writes.  nova 34 copies and writes the node's own
subtree only (``get_provider_subtree_and_ensure_root``): nothing to guard.
"""

import logging
import threading

LOG = logging.getLogger(__name__)


def writes_back_whole_tree(client):
    """Whether nova's resource tracker, with this report client, writes each node's
    update back from a copy of the whole cache (nova 31 to 33)."""
    return not hasattr(client, "get_provider_subtree_and_ensure_root")


class ProviderCache:
    """nova's provider cache, as the resource tracker's report client holds it."""

    def __init__(self, client_of):
        self._client_of = client_of  # () -> nova's report client, or None (nova's tests)
        self._dropped = set()  # released, to drop when no write-back runs
        self._dropped_lock = threading.Lock()
        self._writing = threading.Lock()
        self._guarded = None

    def forget(self, released):
        """Drop the released nodes' providers: now, or when the write-back running
        ends (never waiting for it)."""
        client = self._client()
        if not released or client is None:
            return
        with self._dropped_lock:
            self._dropped |= set(released)
        if self._writing.acquire(blocking=False):
            try:
                self._drop(client)
            finally:
                self._writing.release()

    def guard(self):
        """Guard nova's write-back now, where it needs it (before the first release)."""
        self._client()

    def _client(self):
        client = self._client_of()
        if client is not None and client is not self._guarded:
            self._guarded = client
            if writes_back_whole_tree(client):
                self._guard_write_back(client)
        return client

    def _drop(self, client):
        with self._dropped_lock:
            released, self._dropped = self._dropped, set()
        try:
            for uuid in released:
                client.invalidate_resource_provider(uuid)
        except Exception as e:  # noqa: BLE001 - the next write re-reads after its 409
            LOG.warning("could not drop %d released nodes from nova's provider cache: %s",
                        len(released), e)

    def _guard_write_back(self, client):
        write = client.update_from_provider_tree

        def update_from_provider_tree(context, new_tree, allocations=None):
            with self._writing:
                self._drop(client)
                try:
                    _without_dropped(new_tree, client._provider_tree)
                    return write(context, new_tree, allocations=allocations)
                finally:
                    self._drop(client)
        client.update_from_provider_tree = update_from_provider_tree


def _without_dropped(new_tree, cache):
    """Remove from nova's copy the root providers the cache no longer holds: dropped
    since the copy was made (the node being updated included, when it was released)."""
    for uuid in new_tree.get_provider_uuids():
        if (new_tree.exists(uuid) and new_tree.data(uuid).parent_uuid is None
                and not cache.exists(uuid)):
            LOG.debug("provider %s left out of nova's write-back: released meanwhile", uuid)
            new_tree.remove(uuid)
