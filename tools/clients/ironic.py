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

"""Ironic's API as the operator drives it: nodes created, moved through their states,
changed and deleted."""

import concurrent.futures
import threading
import uuid

from tools.clients import common
from tools.wait import wait_for
from tools.wait import wait_until

IRONIC_VERSION = {"X-OpenStack-Ironic-API-Version": "1.95"}
# A connection per request: Ironic's API server closes a kept-alive connection after
# 10 s idle, and a reuse racing that close fails (a loopback connect costs next to nothing).
IRONIC_HEADERS = {**IRONIC_VERSION, "Connection": "close"}
# Ironic 39 serves its API with cheroot's defaults, which ironic.conf cannot change: 10
# worker threads and a listen backlog of 5.  More connections arriving at once than it
# accepts overflow the kernel's accept queue (TcpExtListenOverflows), and some of them
# are reset ("Connection reset by peer"): 5 of 96 node creations at 24 at once, 17 at 48,
# none at 8 or fewer.  Ironic is the bottleneck either way (96 creations took 5.7 s at
# 4 at once and 5.1 s at 24), so every helper of a process shares these few slots,
# whichever test, topology or thread it serves.
IRONIC_SLOTS = threading.BoundedSemaphore(4)


class Ironic:
    """Each write names how a fresh read shows that it landed (``call``), so one that
    met a dropped connection is sent again only when it did not."""

    def __init__(self, url, shard, auth=None):
        self.url, self.shard = url, shard
        self.http = common.session(IRONIC_HEADERS, auth)
        self.deleted = []  # nodes deleted through this helper

    def _call(self, method, path, expect=(200, 201, 202, 204), landed=None, **kw):
        return common.call(self.http, method, self.url + path, expect, landed=landed,
                    slots=IRONIC_SLOTS, **kw)

    def get(self, node):
        return self._call("GET", f"/v1/nodes/{node}")

    def vifs(self, node):
        """The ids of the VIFs attached to ``node``."""
        return [vif["id"] for vif in self._call("GET", f"/v1/nodes/{node}/vifs")["vifs"]]

    def find(self, node):
        """The node, or None when Ironic has no such node."""
        found = self._call("GET", f"/v1/nodes/{node}", expect=(200, 404))
        return None if found is None or "error_message" in found else found

    def wait_state(self, node, state, timeout=30):
        """The node once it rests in provision state ``state``."""
        def reached(found):
            return found["provision_state"] == state and not found["target_provision_state"]
        return wait_until(lambda: self.get(node), reached, timeout,
                          f"node {node} in {state}")

    def provision(self, node, target, state):
        def landed():  # reached, or on its way
            found = self.get(node)
            return found["provision_state"] == state or bool(found["target_provision_state"])
        self._call("PUT", f"/v1/nodes/{node}/states/provision", json={"target": target},
                   landed=landed)
        return self.wait_state(node, state)

    def create(self, resource_class="baremetal-gold", state="available", traits=(),
               maintenance=False, instance=False, power="power on"):
        """A node in the given state (enroll, manageable, available, active)."""
        node = self.enroll(resource_class, traits)
        if state != "enroll":
            self.provision(node, "manage", "manageable")
        if state in ("available", "active"):
            self.provision(node, "provide", "available")
        if power and state != "enroll":
            self.set_power(node, power)
        if instance or state == "active":
            self.patch(node, instance_uuid=str(uuid.uuid4()))
        if state == "active":
            self.provision(node, "active", "active")
        if maintenance:
            self.set_maintenance(node, True)
        return node

    def enroll(self, resource_class="baremetal-gold", traits=()):
        """A new node in enroll state, of this shard; its uuid."""
        node = str(uuid.uuid4())  # ours, so a repeat can look for it
        body = {"uuid": node, "driver": "fake-hardware", "shard": self.shard}
        if resource_class is not None:
            body["resource_class"] = resource_class
        self._call("POST", "/v1/nodes", json=body, landed=lambda: self.find(node) is not None)
        if traits:
            self.set_traits(node, traits)
        return node

    def create_many(self, count, **kw):
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            return list(pool.map(lambda _: self.create(**kw), range(count)))

    def set_power(self, node, target):
        def landed():
            found = self.get(node)
            return found["power_state"] == target or bool(found["target_power_state"])
        self._call("PUT", f"/v1/nodes/{node}/states/power", json={"target": target},
                   landed=landed)
        wait_for(lambda: self.get(node)["power_state"] == target, 10,
                 f"node {node} {target}")

    def patch(self, node, **fields):
        ops = [{"op": "add" if v is not None else "remove", "path": f"/{k}",
                **({"value": v} if v is not None else {})} for k, v in fields.items()]
        def landed():
            found = self.get(node)
            return all(found.get(k) == v for k, v in fields.items())
        return self._call("PATCH", f"/v1/nodes/{node}", json=ops, landed=landed)

    def set_maintenance(self, node, on):
        if on:
            self._call("PUT", f"/v1/nodes/{node}/maintenance", json={"reason": "test"},
                       landed=common.repeatable)
        else:
            self._call("DELETE", f"/v1/nodes/{node}/maintenance",
                       landed=lambda: not self.get(node)["maintenance"])

    def set_traits(self, node, traits):
        self._call("PUT", f"/v1/nodes/{node}/traits", json={"traits": list(traits)},
                   landed=common.repeatable)

    def delete(self, node):
        self._call("DELETE", f"/v1/nodes/{node}", landed=lambda: self.find(node) is None)
        self.deleted.append(node)  # its provider is the test's to clean up (remove_providers)
