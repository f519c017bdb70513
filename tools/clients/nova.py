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

"""nova's compute API as a user and an operator drive it (flavors, servers, services,
instance actions), for the nova-cloud tests and the nova demo."""

import datetime

from tools.clients import common
from tools.wait import NotSeen
from tools.wait import wait_for
from tools.wait import wait_until

MICROVERSION = {"OpenStack-API-Version": "compute 2.95"}
# A bare-metal flavor: one unit of the node's class and none of the virtual resources
# (nova's Ironic documentation's recipe).
NO_VIRTUAL = {"resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}


class Nova:
    """As the bootstrap admin, or as whoever ``auth`` (a clients.KeystoneToken) is."""

    def __init__(self, stack, auth=None, image_name=None):
        """``image_name``: the image servers boot from by default (else Glance's first:
        on a cloud other suites share, it may be one they made with required traits)."""
        self.url = stack.url("nova") + "/v2.1"
        self.http = common.session(MICROVERSION, auth=auth or stack.admin_auth("compute"))
        images = common.call(self.http, "GET", stack.url("glance") + "/v2/images" + (
            f"?name={image_name}" if image_name else ""), (200,))
        self.image = images["images"][0]["id"]

    def _call(self, method, path, expect=(200, 201, 202, 204), **kw):
        return common.call(self.http, method, self.url + path, expect, **kw)

    def _respond(self, method, path, expect, **kw):
        return common.respond(self.http, method, self.url + path, expect, **kw)

    # -- flavors ---------------------------------------------------------------
    def flavor(self, name, resource_class, extra_specs=None, projects=None, disk=0):
        """A flavor asking for one unit of ``resource_class`` (a normalized CUSTOM_ name)
        and ``extra_specs``; with ``projects``, private to them.  Made on first use.
        ``disk``: what the flavor says (nova lets only admins boot a flavor of 0 from an
        image); Placement is asked for none either way."""
        for flavor in self._call("GET", "/flavors?is_public=None")["flavors"]:
            if flavor["name"] == name:
                return flavor["id"]
        flavor = self._call("POST", "/flavors", json={"flavor": {
            "name": name, "ram": 1, "vcpus": 1, "disk": disk,
            "os-flavor-access:is_public": projects is None}})["flavor"]["id"]
        self._call("POST", f"/flavors/{flavor}/os-extra_specs", json={"extra_specs": {
            f"resources:{resource_class}": "1", **NO_VIRTUAL, **(extra_specs or {})}})
        for project in projects or ():
            self._call("POST", f"/flavors/{flavor}/action",
                       json={"addTenantAccess": {"tenant": project}})
        return flavor

    def sees_flavor(self, flavor):
        """Whether this user can read the flavor (a private one of another project: no)."""
        resp = self.http.get(f"{self.url}/flavors/{flavor}", timeout=30)
        assert resp.status_code in (200, 404), f"GET flavor: {resp.status_code} {resp.text}"
        return resp.status_code == 200

    def aggregates(self):
        """nova's host aggregates (os-aggregates records, with their uuids)."""
        return self._call("GET", "/os-aggregates")["aggregates"]

    # -- servers ---------------------------------------------------------------
    def boot(self, name, flavor, host=None, node=None, image=None, group=None):
        """A server with no network; its id.  ``host`` (and ``node``): an admin's
        forced destination (nova's "nova:host[:node]" zone), still claimed in Placement;
        ``group``: a server group it is booted into (its policy is the scheduler's)."""
        server = {"name": name, "flavorRef": flavor, "imageRef": image or self.image,
                  "networks": "none"}
        if host:
            server["availability_zone"] = ":".join(["nova", host, *([node] if node else [])])
        hints = {"os:scheduler_hints": {"group": group}} if group else {}
        return self._call("POST", "/servers", json={"server": server, **hints})["server"]["id"]

    def server_group(self, name, policy):
        """A new server group with ``policy`` (anti-affinity, affinity ...); its id."""
        return self._call("POST", "/os-server-groups", json={"server_group": {
            "name": name, "policy": policy}})["server_group"]["id"]

    def delete_server_group(self, group):
        self._call("DELETE", f"/os-server-groups/{group}", expect=(204, 404))

    def reboot(self, server):
        """A hard reboot asked; the request's id (its instance action's)."""
        return self._respond("POST", f"/servers/{server}/action", (202,),
                             json={"reboot": {"type": "HARD"}}).headers["x-openstack-request-id"]

    def action(self, server, request):
        """The instance action of ``request`` (an id the API answered with): its name
        and {event: result}; None when nova recorded no action for it."""
        resp = self._respond("GET", f"/servers/{server}/os-instance-actions/{request}",
                             (200, 404))
        if resp.status_code == 404:
            return None
        found = resp.json()["instanceAction"]
        return found["action"], {e["event"]: e.get("result") for e in found.get("events", [])}

    def operable(self, server, timeout=90):
        """A hard reboot of the server completes (ACTIVE, no task) within ``timeout``:
        its compute service answers for it."""
        self.reboot(server)
        try:
            wait_for(lambda: self._settled(self.server(server)), timeout,
                     f"server {server} rebooted", interval=1)
        except NotSeen:
            return False
        return True

    @staticmethod
    def _settled(found):
        return found["status"] == "ACTIVE" and not found["OS-EXT-STS:task_state"]

    def server(self, server):
        """The server, or None once it is gone."""
        resp = self.http.get(f"{self.url}/servers/{server}", timeout=30)
        if resp.status_code == 404:
            return None
        assert resp.status_code == 200, f"GET server {server}: {resp.status_code} {resp.text}"
        return resp.json()["server"]

    def wait_built(self, server, timeout=180, fault_within=30):
        """The server once it is ACTIVE or ERROR (AssertionError after ``timeout``); in
        ERROR, with its fault when nova records one within ``fault_within`` s.  nova
        saves the ERROR first and adds the fault after it (the conductor's
        set_vm_state_and_notify): a read in between saw ERROR without its fault on
        nova 31 ("No valid host" a moment later)."""
        built = wait_until(lambda: self.server(server),
                           lambda found: found["status"] in ("ACTIVE", "ERROR"), timeout,
                           f"server {server} ACTIVE or ERROR", interval=0.5)
        if built["status"] == "ERROR" and not built.get("fault"):
            try:
                built = wait_until(lambda: self.server(server),
                                   lambda found: bool(found.get("fault")), fault_within,
                                   f"server {server}'s fault", interval=0.5)
            except NotSeen:
                pass
        return built

    def servers(self, prefix):
        """The records of every server whose name starts with ``prefix`` (one page: up
        to nova's [api] max_limit)."""
        return self._call("GET", f"/servers/detail?name=^{prefix}&limit=1000")["servers"]

    def delete(self, server):
        """Delete the server (gone already: nothing); the request's id."""
        return self._respond("DELETE", f"/servers/{server}", (204, 404)).headers.get(
            "x-openstack-request-id")

    def wait_gone(self, server, timeout=120):
        wait_for(lambda: self.server(server) is None, timeout, f"server {server} gone",
                 interval=0.5)

    def delete_all(self, flavor):
        """Delete every server of this flavor (any project) and wait until they are gone."""
        servers = self._call("GET", f"/servers?all_tenants=1&flavor={flavor}")["servers"]
        for server in servers:
            self.delete(server["id"])
        for server in servers:
            self.wait_gone(server["id"])

    def attempts(self, server):
        """How many times a compute service started building the server (1 when it
        was never rescheduled; 0 when the scheduler found no host at all, and nova
        records no action for such a server): the create action's build events."""
        actions = self._call("GET", f"/servers/{server}/os-instance-actions")
        create = next((a for a in actions["instanceActions"] if a["action"] == "create"), None)
        if create is None:
            return 0
        events = self._call("GET", f"/servers/{server}/os-instance-actions/"
                                   f"{create['request_id']}")["instanceAction"]["events"]
        return sum(e["event"] == "compute__do_build_and_run_instance" for e in events)

    def events(self, server):
        """[(action, event, host, start time, result)] of every event of every instance
        action of the server (nova's ``server event list``, admin's view with the host)."""
        found = []
        for action in self._call("GET", f"/servers/{server}/os-instance-actions")[
                "instanceActions"]:
            detail = self._call("GET", f"/servers/{server}/os-instance-actions/"
                                       f"{action['request_id']}")["instanceAction"]
            found += [(action["action"], e["event"], e.get("host"), e["start_time"],
                       e.get("result")) for e in detail.get("events", [])]
        return found

    # -- compute services --------------------------------------------------------
    def compute_service(self, host):
        """nova-compute ``host``'s os-services record, or None before it registered."""
        services = self._call("GET", f"/os-services?binary=nova-compute&host={host}")
        return (services["services"] or [None])[0]

    def set_service_status(self, host, enabled):
        service = self.compute_service(host)
        self._call("PUT", f"/os-services/{service['id']}", json={
            "status": "enabled" if enabled else "disabled",
            **({} if enabled else {"disabled_reason": "test"})})

    def set_forced_down(self, host, forced_down):
        """``openstack compute service set --down`` (or ``--up``): as an operator, or
        an evacuation tool such as Masakari, sets the flag."""
        service = self.compute_service(host)
        self._call("PUT", f"/os-services/{service['id']}", json={"forced_down": forced_down})

    def compute_up(self, host, since=None):
        """nova-compute ``host`` is up (and, with ``since``, a naive UTC datetime, has
        reported after it: a service restarted then has run its resource tracker's
        start-up pass, which nova-compute finishes before it first reports)."""
        service = self.compute_service(host)
        if not service or service["state"] != "up":
            return False
        return since is None or bool(service["updated_at"]) and datetime.datetime.fromisoformat(
            service["updated_at"]).replace(tzinfo=None) > since  # None: no report yet

    def compute_nodes(self):
        """{node uuid: [host of each compute node record for it]} (one each, when no
        node is double-claimed)."""
        found, path = {}, "/os-hypervisors/detail"
        while path:  # nova answers a page of [api] max_limit (1,000) at a time
            page = self._call("GET", path)
            for hypervisor in page["hypervisors"]:
                found.setdefault(hypervisor["hypervisor_hostname"], []).append(
                    hypervisor["service"]["host"])
            following = [link["href"] for link in page.get("hypervisors_links", ())
                         if link["rel"] == "next"]
            path = following and following[0][following[0].index("/os-hypervisors"):]
        return found
