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

"""Is ``POST /reshaper`` (1.30+: many providers' inventories in one request) a
faster bulk path, and does it stay correct under conflicts?

    tox -e bench -- reshaper --nodes 1000

On one real Placement: N providers are created and given their traits, then
half get their inventory one ``PUT`` each and half through reshaper batches;
wall time per provider is compared.  Then a batch in which one provider's
generation was bumped by a foreign writer is sent: the whole batch must be
refused with 409 and no provider in it changed.
"""

import time
import uuid as uuidlib

from tools import clients
from tools.bench import common

INVENTORY = {"CUSTOM_BAREMETAL_GOLD": {"total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1,
                                       "step_size": 1, "allocation_ratio": 1.0}}


def _providers(placement, count):
    """count new providers with one trait each; {uuid: generation}."""
    placement._call("PUT", "/traits/CUSTOM_RPR_MANAGED")
    placement._call("PUT", "/resource_classes/CUSTOM_BAREMETAL_GOLD")
    generations = {}
    for _ in range(count):
        rp = str(uuidlib.uuid4())
        created = placement._call("POST", "/resource_providers", json={"uuid": rp, "name": rp})
        generations[rp] = placement._call("PUT", f"/resource_providers/{rp}/traits", json={
            "resource_provider_generation": created["generation"],
            "traits": ["CUSTOM_RPR_MANAGED"]})["resource_provider_generation"]
    return generations


def reshape(placement, generations, inventories):
    """One reshaper request; the response."""
    return placement.http.post(
        f"{placement.url}/reshaper", timeout=120,
        # Reshaper is a service-role call (nova's Placement user has it); the local
        # stack's noauth2 takes the roles from this header.
        headers={"OpenStack-API-Version": "placement 1.38", "X-Roles": "admin,service"},
        json={"inventories": {rp: {"resource_provider_generation": gen,
                                   "inventories": inventories}
                              for rp, gen in generations.items()},
              "allocations": {}})


def run(args):
    stack = common.new_stack()
    results = []
    try:
        common.start(stack, ["placement"])
        placement = clients.Placement(stack.placement_url)
        generations = _providers(placement, args.nodes)
        uuids = list(generations)
        half = len(uuids) // 2
        started = time.monotonic()
        for rp in uuids[:half]:
            placement._call("PUT", f"/resource_providers/{rp}/inventories", json={
                "resource_provider_generation": generations[rp], "inventories": INVENTORY})
        per_put = (time.monotonic() - started) / half
        results.append({"path": "PUT inventories, one per provider", "providers": half,
                        "requests": half, "ms_per_provider": round(1000 * per_put, 2),
                        "load": common.load()})
        rest = uuids[half:]
        for batch in args.batches:
            chunk, rest = rest[:batch], rest[batch:]
            if len(chunk) < batch:
                break
            started = time.monotonic()
            resp = reshape(placement, {rp: generations[rp] for rp in chunk}, INVENTORY)
            seconds = time.monotonic() - started
            assert resp.status_code == 204, f"reshaper: {resp.status_code} {resp.text}"
            results.append({"path": f"POST /reshaper, batches of {batch}", "providers": batch,
                            "requests": 1, "ms_per_provider": round(1000 * seconds / batch, 2),
                            "load": common.load()})

        # Under a conflict: a foreign writer bumps one provider in the batch.
        chunk = uuids[:20]
        current = {rp: placement._call("GET", f"/resource_providers/{rp}")["generation"]
                   for rp in chunk}
        placement.add_trait(chunk[7], "CUSTOM_FOREIGN")
        changed = dict(INVENTORY)
        changed["CUSTOM_BAREMETAL_GOLD"] = {**INVENTORY["CUSTOM_BAREMETAL_GOLD"], "reserved": 1}
        resp = reshape(placement, current, changed)
        untouched = all(
            placement._call("GET", f"/resource_providers/{rp}/inventories")["inventories"]
            ["CUSTOM_BAREMETAL_GOLD"]["reserved"] == 0 for rp in chunk)
        conflict = {"status": resp.status_code, "whole_batch_untouched": untouched}
    finally:
        stack.stop()
    common.print_table(results, ("path", "providers", "requests", "ms_per_provider", "load"))
    print(f"batch of 20 with one stale generation: HTTP {conflict['status']}, "
          f"every provider untouched: {conflict['whole_batch_untouched']}")
    common.save({"rows": results, "conflict": conflict}, "reshaper")
    return {"rows": results, "conflict": conflict}
