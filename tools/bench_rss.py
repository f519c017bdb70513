"""Peak RSS of one agent's state for 100,000 nodes.

    tox -e bench -- rss --nodes 100000

Placement is the real one.  Ironic's read side is a STUB (labelled so in the
output): it serves the real Ironic's own answers, captured from a real Ironic
holding a few sample nodes (version documents, headers, and node records with
the fields rp_reporter asks for), repeated with new uuids under Ironic's
pagination (limit, marker, next link).  Loading 100,000 nodes into the real
Ironic here would take over an hour.

A probe process then loads what the agent loads (oslo.messaging, tooz,
prometheus-client, the clients), builds the reporter from configuration as the
agent does, runs the periodic drift (both listings, desired state for every
node), queues every node, and fills the observation cache as a completed sync
of every node leaves it, holding a Placement listing of the same size.  It
prints its peak RSS (VmHWM) after each step.
"""

import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.parse
import uuid as uuidlib

from tools import bench
from tools import fleet
from tools import localstack


class IronicStub(http.server.ThreadingHTTPServer):
    """Serves ``count`` nodes made from real Ironic node records."""

    daemon_threads = True

    def __init__(self, count, captured):
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.count, self.captured = count, captured
        self.url = f"http://127.0.0.1:{self.server_address[1]}"

    def record(self, i, fields):
        template = self.captured["nodes"][i % len(self.captured["nodes"])]
        record = {k: v for k, v in template.items() if not fields or k in fields or k == "links"}
        node = str(uuidlib.UUID(int=i + 1))
        record["uuid"] = node
        record["links"] = [{**link, "href": link["href"].replace(template["uuid"], node)}
                           for link in template.get("links", [])]
        return record


class StubHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, body, status=200):
        data = json.dumps(body).encode()
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
        if path.startswith("/v1/nodes/"):
            index = uuidlib.UUID(path.rsplit("/", 1)[1]).int - 1
            if 0 <= index < stub.count:
                return self._send(stub.record(index, fields))
        return self._send({"error_message": "not found"}, 404)


def capture(ironic_url):
    """The real Ironic's answers the stub repeats: version documents, headers, nodes."""
    ironic = fleet.Ironic(ironic_url, "rss")
    bench.load_nodes(ironic, 3, threads=1)  # two classes, one node with a trait
    from rp_reporter.sync import ironic as ironic_sync
    fields = ",".join(ironic_sync.NODE_FIELDS)
    resp = ironic.http.get(f"{ironic_url}/v1/nodes?fields={fields}&shard=rss", timeout=30)
    resp.raise_for_status()
    versions = {"/": ironic.http.get(ironic_url + "/", timeout=30).json(),
                "/v1": ironic.http.get(ironic_url + "/v1", timeout=30).json()}
    headers = {k: v for k, v in resp.headers.items() if k.lower().startswith("x-openstack")}
    return {"nodes": resp.json()["nodes"], "versions": versions, "headers": headers}


def peak_mb():
    """This process's peak RSS (VmHWM).  Not ru_maxrss: that survives exec, so a
    child would start with its parent's peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM in /proc/self/status")


def probe(conf_path):
    """In its own process: the agent's state for every node the stub serves."""
    # What the agent loads (tooz, prometheus-client, oslo.messaging), so the
    # baseline is the agent's.
    from rp_reporter import agent  # noqa: F401
    from rp_reporter import conf as rp_conf
    from rp_reporter import model
    from rp_reporter import wiring
    from rp_reporter.sync import events  # noqa: F401
    from rp_reporter.sync import plan as planner
    from rp_reporter.sync import queue as work_queue

    steps = {"imported": peak_mb()}
    conf = rp_conf.load(["--config-file", conf_path])
    reconciler = wiring.reconciler(conf)
    drift = reconciler.drift()  # Placement is empty: every node is new
    steps["drift (listings, desired state)"] = peak_mb()
    queue = work_queue.WorkQueue(lambda key: True)  # not started: holds the keys
    for key in drift.keys + [d.uuid for d in drift.new]:
        queue.add(key)
    steps[f"queued ({queue.depth()} keys)"] = peak_mb()
    desired = [model.desired(model.node_from_api(r)) for r in reconciler.ironic.iter_nodes()]
    listed = {d.uuid: (d.name, 3) for d in desired}  # a Placement listing of the same size
    syncer = reconciler.syncer
    for d in desired:  # as a completed sync of each node leaves the cache
        syncer._remember(None, planner.plan(d, None), 2)  # noqa: SLF001
    steps[f"cache and listing ({len(desired)} and {len(listed)} providers)"] = peak_mb()
    print(json.dumps({"nodes": drift.nodes, "peak_rss_mb": peak_mb(), "steps": steps}))


def bench_rss(args):
    stack = localstack.LocalStack()
    try:
        stack.start(["rabbitmq", "placement", "ironic"])
        stub = IronicStub(args.nodes, capture(stack.ironic_url))
        threading.Thread(target=stub.serve_forever, daemon=True).start()
        conf_path = os.path.join(stack.workdir, "rss.conf")
        with open(conf_path, "w") as f:
            f.write(stack.reporter_conf(ironic={"endpoint_override": stub.url}))
        out = subprocess.run([sys.executable, "-m", "tools.bench_rss", "--probe", conf_path],
                             capture_output=True, text=True, check=True, timeout=1800)
        result = json.loads(out.stdout.strip().splitlines()[-1])
        result["ironic"] = "STUB serving the real Ironic's node JSON (see tools/bench_rss.py)"
        stub.shutdown()
    finally:
        stack.stop()
    bench.print_table([{"step": k, "peak_rss_mb": v} for k, v in result["steps"].items()],
                      ("step", "peak_rss_mb"))
    print(f"peak RSS with {result['nodes']} nodes: {result['peak_rss_mb']} MB "
          f"(Ironic: {result['ironic']})")
    bench.save(result, "rss")
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["--probe"]:
        probe(sys.argv[2])
