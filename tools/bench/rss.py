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

"""Peak RSS of one agent's state for 100,000 nodes.

    tox -e bench -- rss --nodes 100000

Placement is the real one, empty at first.  Ironic's read side is a STUB
(labelled so in the output): it serves the real Ironic's own answers, captured
from a real Ironic holding a few sample nodes (version documents, headers, and
node records with the fields rp_reporter asks for), repeated with new uuids
under Ironic's pagination (limit, marker, next link): loading 100,000 nodes
through the real Ironic's API would take far longer than the benchmark.  The
same stub serves the later Placement listing of a provider per node, one
provider captured from the real Placement repeated with each node's uuid
(creating 100,000 providers would take long too).

A probe process then loads what the agent loads (oslo.messaging, tooz,
prometheus-client, the clients), builds the reporter from configuration as the
agent does, and goes through an agent's life: the first resync (both listings,
desired state for every node, all of them new), the bulk creation as it leaves
the observation cache, a later resync against a Placement listing of the same
size, and, at the worst, every node in the work queue at once.  It prints its
peak RSS (VmHWM) after each step.
"""

import http.server
import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid as uuidlib

from tools import clients
from tools.bench import common

GENERATION = 2  # of every provider the stub lists, and in the probe's cache


class ListingStub(http.server.ThreadingHTTPServer):
    """Serves ``count`` nodes made from real Ironic node records, and under
    /placement Placement's listing of a provider for each, made from a real one."""

    daemon_threads = True

    def __init__(self, count, captured):
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.count, self.captured = count, captured
        self._listing = None
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def record(self, i, fields):
        template = self.captured["nodes"][i % len(self.captured["nodes"])]
        record = {k: v for k, v in template.items() if not fields or k in fields or k == "links"}
        node = str(uuidlib.UUID(int=i + 1))
        record["uuid"] = node
        record["links"] = [{**link, "href": link["href"].replace(template["uuid"], node)}
                           for link in template.get("links", [])]
        return record


    def provider_listing(self):
        """Placement's answer listing a provider per node, as after their creation."""
        if self._listing is None:
            template = self.captured["provider"]
            entries = []
            for i in range(self.count):
                node = str(uuidlib.UUID(int=i + 1))
                text = json.dumps({**template, "generation": GENERATION})
                entries.append(text.replace(template["uuid"], node))
            self._listing = ('{"resource_providers": [' + ", ".join(entries) + "]}").encode()
        return self._listing


class StubHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body, status=200):
        self._send_bytes(json.dumps(body).encode(), status)

    def _send_bytes(self, data, status=200):
        self.send_response(status)
        for name, value in self.server.captured["headers"].items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802 - http.server's naming
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        path = url.path.rstrip("/")
        stub = self.server
        if path in ("", "/v1"):
            return self._send(stub.captured["versions"][path or "/"])
        fields = set(",".join(query.get("fields", [""])).split(",")) - {""}
        if path == "/v1/nodes":
            limit = int(query.get("limit", ["1000"])[0]) or stub.count
            marker = query.get("marker", [None])[0]
            start = uuidlib.UUID(marker).int if marker else 0  # uuid i+1 is node i
            nodes = [stub.record(i, fields) for i in range(start, min(start + limit,
                                                                      stub.count))]
            body = {"nodes": nodes}
            if len(nodes) == limit:
                next_query = urllib.parse.urlencode({**{k: v[0] for k, v in query.items()},
                                                     "marker": nodes[-1]["uuid"]})
                body["next"] = f"{stub.url}/v1/nodes?{next_query}"
            return self._send(body)
        if path == "/placement/resource_providers":
            return self._send_bytes(stub.provider_listing())
        if path.startswith("/v1/nodes/"):
            index = uuidlib.UUID(path.rsplit("/", 1)[1]).int - 1
            if 0 <= index < stub.count:
                return self._send(stub.record(index, fields))
        return self._send({"error_message": "not found"}, 404)


def capture_provider(placement_url):
    """One provider as the real Placement lists it (at the reporter's microversion);
    the stub repeats it with each node's uuid as its uuid, name and root."""
    from rp_reporter.sync import placement as placement_sync
    placement = clients.Placement(placement_url)
    rp = str(uuidlib.uuid4())
    placement._call("POST", "/resource_providers", json={"uuid": rp, "name": rp})  # noqa: SLF001
    resp = placement.http.get(f"{placement_url}/resource_providers?uuid={rp}", timeout=30,
                              headers={"OpenStack-API-Version":
                                       f"placement {placement_sync.MICROVERSION}"})
    resp.raise_for_status()
    (provider,) = resp.json()["resource_providers"]
    return provider


def capture(ironic_url):
    """The real Ironic's answers the stub repeats: version documents, headers, nodes."""
    ironic = clients.Ironic(ironic_url, "rss")
    common.load_nodes(ironic, 3, threads=1)  # two classes, one node with a trait
    from rp_reporter.sync import ironic as ironic_sync
    fields = ",".join(ironic_sync.NODE_FIELDS)
    resp = ironic.http.get(f"{ironic_url}/v1/nodes?fields={fields}&shard=rss", timeout=30)
    resp.raise_for_status()
    versions = {"/": ironic.http.get(ironic_url + "/", timeout=30).json(),
                "/v1": ironic.http.get(ironic_url + "/v1", timeout=30).json()}
    headers = {k: v for k, v in resp.headers.items() if k.lower().startswith("x-openstack")}
    return {"nodes": resp.json()["nodes"], "versions": versions, "headers": headers}


def peak_mb():
    """This process's peak RSS in MiB (the key's name predates the units being named)."""
    return round(common.peak_rss() / (1024 * 1024), 1)


def probe(conf_path, placement_listing_url):
    """In its own process: the agent's state for every node the stub serves."""
    # What the agent loads (tooz, prometheus-client, oslo.messaging), so the
    # baseline is the agent's.
    from rp_reporter import agent  # noqa: F401
    from rp_reporter import conf as rp_conf
    from rp_reporter import wiring
    from rp_reporter.sync import events  # noqa: F401
    from rp_reporter.sync import plan as planner
    from rp_reporter.sync import queue as work_queue

    steps = {"imported": peak_mb()}
    conf = rp_conf.load(["--config-file", conf_path])
    reconciler = wiring.reconciler(conf)
    syncer = reconciler.provider_sync
    drift = reconciler.drift()  # Placement is empty: every node is new
    nodes = drift.nodes
    steps["first resync (listings, desired state)"] = peak_mb()
    # The bulk creation, as the agent's create_in_bulk leaves it: the desired
    # providers used up batch by batch, each batch remembered in the cache.
    new, drift = drift.new, None
    while new:
        for d in new[-conf.reconcile.bulk_batch:]:
            syncer._remember(None, planner.plan(d, None), GENERATION)  # noqa: SLF001
        del new[-conf.reconcile.bulk_batch:]
    steps[f"created in bulk (cache of {len(syncer._cache)})"] = peak_mb()  # noqa: SLF001
    # Every later resync: both listings again (Placement's, of every provider,
    # from the stub through the real client), the cache proving each in step.
    conf.set_override("endpoint", placement_listing_url, "placement")
    syncer.placement = wiring.placement_client(conf)
    drift = reconciler.drift()
    steps[f"next resync ({drift.nodes} nodes listed on both sides, "
          f"{len(drift.keys) + len(drift.new)} to do)"] = peak_mb()
    queue = work_queue.WorkQueue()  # not started: holds the keys
    for key in syncer._cache:  # noqa: SLF001
        queue.add(key)
    steps[f"every node queued ({queue.depth()} keys)"] = peak_mb()
    peak = peak_mb()
    # Time (after the peak is taken): the no-change pass's observation against the
    # stub's listings, and the two listings alone, in turns, the best of three each.
    queue = drift = None
    seconds = {"no change (warm): the pass's observation": [], "the two listings": []}
    for _ in range(3):
        started = time.monotonic()
        reconciler.ironic.list_nodes()
        syncer.placement.list_providers()
        seconds["the two listings"].append(time.monotonic() - started)
        started = time.monotonic()
        reconciler.drift()
        seconds["no change (warm): the pass's observation"].append(time.monotonic() - started)
    seconds = {k: min(v) for k, v in seconds.items()}
    print(json.dumps({"nodes": nodes, "peak_rss_mb": peak, "steps": steps,
                      "seconds": {k: round(v, 2) for k, v in seconds.items()}}))


def run(args):
    stack = common.new_stack()
    try:
        common.start(stack, ["rabbitmq", "placement", "ironic"])
        stub = ListingStub(args.nodes, {**capture(stack.ironic_url),
                                       "provider": capture_provider(stack.placement_url)})
        threading.Thread(target=stub.serve_forever, daemon=True).start()
        conf_path = os.path.join(stack.workdir, "rss.conf")
        with open(conf_path, "w") as f:
            f.write(stack.reporter_conf(ironic={"endpoint_override": stub.url}))
        out = subprocess.run([sys.executable, "-m", "tools.bench.rss", "--probe", conf_path,
                              f"{stub.url}/placement"],
                             capture_output=True, text=True, check=True, timeout=1800)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["load"] = common.load()
        result["listings"] = ("STUB serving the real Ironic's node JSON and the real "
                              "Placement's provider JSON (see tools/bench/rss.py)")
        stub.shutdown()
    finally:
        stack.stop()
    common.print_table([{"step": k, "peak_rss_mb": v} for k, v in result["steps"].items()],
                       ("step", "peak_rss_mb"))
    print(f"peak RSS with {result['nodes']} nodes: {result['peak_rss_mb']} MiB "
          f"(listings: {result['listings']})")
    common.save(result, "rss")
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        probe(sys.argv[2], sys.argv[3])
