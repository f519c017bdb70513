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

"""What a cloud's users do and see while it is upgraded: a user booting servers in a
loop (``BootLoop``), and what nova's scheduler is offered and which services nova shows
forced down, once a second (``Sampler``)."""

import contextlib
import threading
import time

from tools import clients
from tools.localstack import glance

HOSTS = ("up-1", "up-2", "up-3")
SHARD = "shard-upgrade"
SETTLE = 240  # s: the longest a boot (and its delete) may take


class Sampler:
    """Once a second: which free nodes (available, no instance, not in maintenance) nova's
    scheduler is not offered, and which of the hosts nova shows forced down.  A read that
    fails (a service restarting) leaves the last free nodes not offered."""

    def __init__(self, up):
        # clients of its own: a requests session is not shared between threads
        stack = up.stack
        self.nova = clients.Nova(stack)
        self.ironic = clients.Ironic(stack.ironic_url, SHARD, auth=stack.admin_auth("baremetal"))
        self.placement = clients.Placement(stack.placement_url,
                                           auth=stack.admin_auth("placement"),
                                           nova_traits=stack.release.nova_traits)
        self.resource_class = up.resource_class
        self.free, self.since, self.resting, self.worst = set(), {}, set(), None
        self.longest, self.forced = 0.0, set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()

    def reset(self):
        """A new step: its own longest time (and its node) and forced-down hosts."""
        self.longest, self.forced, self.worst = 0.0, set(), None

    def _run(self):
        while not self._stop.wait(1):
            now = time.monotonic()
            try:
                nodes = self.ironic._call(
                    "GET", f"/v1/nodes?shard={SHARD}&fields=uuid,provision_state,"
                           "instance_uuid,maintenance")["nodes"]
                self.free = {n["uuid"] for n in nodes if n["provision_state"] == "available"
                             and not n["instance_uuid"] and not n["maintenance"]}
                unoffered = self.free - self.placement.offered(self.resource_class)
            except Exception:  # noqa: BLE001 - Ironic or Placement restarting: none offered
                unoffered = self.free
            with contextlib.suppress(Exception):  # nova-api restarting
                self.forced |= {h for h in HOSTS
                                if (self.nova.compute_service(h) or {}).get("forced_down")}
            self.since = {n: self.since.get(n, now) for n in unoffered - self.resting}
            for node, began in self.since.items():
                if now - began > self.longest:
                    self.longest, self.worst = now - began, node

    def stop(self):
        self._stop.set()
        self._thread.join()


class BootLoop:
    """A user booting a server, waiting for it, deleting it, over and over.  A boot the
    API answered with an error is ``refused`` (one it did not answer, nova-api
    restarting, is sent again), one that ended in ERROR or not ACTIVE ``failed``,
    each with the API's answer or nova's own reason, under the step it fell in; the
    user's reads go on through restarts (they are not the boot's)."""

    def __init__(self, up, flavors=None):
        """``flavors``: booted in turn (the upgrade's own by default)."""
        self.up, self.failed, self.refused, self.done = up, [], [], 0
        self.flavors = flavors or [up.flavor]
        # its own session (see Sampler), booting the suite's image
        self.nova = clients.Nova(up.stack, image_name=glance.IMAGE_NAME)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="boot-loop", daemon=True)
        self._thread.start()

    def _until(self, what, server, done):
        """``done(the server, None once gone)``, tried once a second through the API's
        restarts; the server (or {}) once done, None after SETTLE."""
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:
            with contextlib.suppress(AssertionError, OSError):
                if what:
                    what(server)  # a write, until it is taken
                    what = None
                found = self.nova.server(server)
                if done(found):
                    return found or {}
            time.sleep(1)
        return None

    def _run(self):
        count = 0
        while not self._stop.is_set():
            count += 1
            step = self.up.current
            try:
                server = self.nova.boot(f"loop-{count}",
                                        self.flavors[count % len(self.flavors)])
            except OSError:  # no answer (nova-api restarting): sent again, as the
                self._stop.wait(1)  # user's client does (keystoneauth's connect_retries)
                continue
            except AssertionError as e:  # the API's answer: refused
                self.refused.append({"step": step, "reason": str(e).splitlines()[0][:300]})
                self._stop.wait(3)
                continue
            built = self._until(None, server, lambda found: found["status"] in (
                "ACTIVE", "ERROR"))
            if built and built["status"] == "ERROR" and not built.get("fault"):
                time.sleep(3)  # nova adds the fault just after the state (Nova.wait_built)
                built = self._until(None, server, lambda found: True)
            if not built or built["status"] != "ACTIVE":
                self.failed.append({"step": step, "server": server, "reason": (
                    (built or {}).get("fault") or {}).get("message", f"not built: {built}")})
            self._until(self.nova.delete, server, lambda found: found is None)
            self.done += 1

    def stop(self):
        self._stop.set()
        self._thread.join(3 * SETTLE)
