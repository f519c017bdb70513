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

"""Placement's API as a test reads it and as nova and foreign writers use it:
providers read, allocations made and removed, traits added under the generation
guard."""

import uuid

from tools.clients import common

PLACEMENT_HEADERS = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


class Placement:
    def __init__(self, url, auth=None, nova_traits=("OWNER_NOVA",)):
        """``nova_traits``: what a provider offered to the stack's nova carries (the
        stack's release: ``stack.release.nova_traits``; OWNER_NOVA, which nova 34's
        scheduler asks for)."""
        self.url = url
        self.http = common.session(PLACEMENT_HEADERS, auth)
        self.nova_traits = tuple(nova_traits)

    def _call(self, method, path, expect=(200, 201, 204), **kw):
        return common.call(self.http, method, self.url + path, expect, **kw)

    def provider(self, rp):
        """(name, generation, inventories, traits), or None when there is no provider
        (also when it vanishes between these reads)."""
        reads = [self.http.get(f"{self.url}/resource_providers/{rp}{part}", timeout=30)
                 for part in ("", "/inventories", "/traits")]
        if any(r.status_code == 404 for r in reads):
            return None
        for r in reads:
            assert r.status_code == 200, f"{r.url}: {r.status_code} {r.text}"
        provider, inv, traits = (r.json() for r in reads)
        return {"name": provider["name"], "generation": inv["resource_provider_generation"],
                "inventories": {rc: (i["total"], i["reserved"], i["max_unit"])
                                for rc, i in inv["inventories"].items()},
                "traits": set(traits["traits"])}

    def provider_inventories(self, rp):
        """One read: the inventories, or None (for tight polling)."""
        resp = self.http.get(f"{self.url}/resource_providers/{rp}/inventories", timeout=30)
        return resp.json()["inventories"] if resp.status_code == 200 else None

    def aggregates(self, rp):
        """The provider's aggregates (uuids)."""
        return set(self._call("GET", f"/resource_providers/{rp}/aggregates",
                              headers={"OpenStack-API-Version": "placement 1.19"})["aggregates"])

    def provider_trait_names(self, rp):
        """One read: the traits, or an empty set (for tight polling)."""
        resp = self.http.get(f"{self.url}/resource_providers/{rp}/traits", timeout=30)
        return set(resp.json()["traits"]) if resp.status_code == 200 else set()

    def offered(self, resource_class):
        """The providers nova's scheduler is offered for one unit of ``resource_class``
        (its allocation candidates, with the root traits of nova's resource tracker)."""
        required = ",".join((*self.nova_traits, "!COMPUTE_STATUS_DISABLED"))
        found = self._call("GET", f"/allocation_candidates?resources={resource_class}:1"
                                  f"&root_required={required}", expect=(200, 400))
        if "errors" in found:  # a 400
            # Nobody made the class yet: Placement 13 answers 400, later ones none.
            assert "No such resource class" in found["errors"][0]["detail"], found
            return set()
        return set(found["provider_summaries"])

    def holding(self, resource_class):
        """The providers with one unit of ``resource_class`` to offer, whoever they are
        for (no trait asked)."""
        found = self._call("GET", f"/resource_providers?resources={resource_class}:1")
        return {rp["uuid"] for rp in found["resource_providers"]}

    def provider_uuids(self):
        """Every resource provider's uuid."""
        return {rp["uuid"] for rp in self._call("GET", "/resource_providers")["resource_providers"]}

    def allocate(self, rp, resource_class):
        consumer = str(uuid.uuid4())
        self._call("PUT", f"/allocations/{consumer}", json={
            "allocations": {rp: {"resources": {resource_class: 1}}},
            "project_id": str(uuid.uuid4()), "user_id": str(uuid.uuid4()),
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        return consumer

    def deallocate(self, consumer):
        self._call("DELETE", f"/allocations/{consumer}")

    def allocations(self, consumer):
        """{provider: {class: amount}} of one consumer ({} when it has none)."""
        held = self._call("GET", f"/allocations/{consumer}")["allocations"]
        return {rp: dict(a["resources"]) for rp, a in held.items()}

    def remove_providers(self, rps):
        """Delete these providers and whatever is allocated against them (test clean-up:
        a provider left for a deleted node would count against the next test's reporter
        as a node gone from Ironic)."""
        for rp in rps:
            resp = self.http.get(f"{self.url}/resource_providers/{rp}/allocations", timeout=30)
            for consumer in resp.json()["allocations"] if resp.status_code == 200 else ():
                self._call("DELETE", f"/allocations/{consumer}", expect=(204, 404))
            self._call("DELETE", f"/resource_providers/{rp}", expect=(204, 404))

    def add_trait(self, rp, trait):
        """A foreign writer: adds a trait of its own, generation-guarded like anyone,
        re-reading and retrying when someone else wrote first (a standard trait, nova's
        own, Placement has already)."""
        if trait.startswith("CUSTOM_"):
            self._call("PUT", f"/traits/{trait}")
        for _ in range(20):
            current = self._call("GET", f"/resource_providers/{rp}/traits")
            resp = self.http.put(f"{self.url}/resource_providers/{rp}/traits", timeout=30, json={
                "resource_provider_generation": current["resource_provider_generation"],
                "traits": current["traits"] + [trait]})
            if resp.status_code != 409:
                assert resp.status_code == 200, f"add_trait: {resp.status_code} {resp.text}"
                return
        raise AssertionError(f"add_trait {trait} on {rp}: conflicts 20 times in a row")
