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

"""etcd, the production profile's coordination backend: a one-member cluster with
its own data dir, client and peer URLs on loopback."""

import json
import os
import urllib.request

from tools.localstack import process

NAME = "etcd"
EXTRA_PORTS = ("etcd_peer",)


def start(stack):
    client, peer = stack.etcd_url, f"http://127.0.0.1:{stack.ports['etcd_peer']}"
    stack.services[NAME].spawn([
        "etcd", "--name", "rp-local", "--data-dir",
        os.path.join(stack.service_dir(NAME), "data"),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", f"rp-local={peer}", "--initial-cluster-state", "new",
        "--initial-cluster-token", f"rp-local-{stack.ports[NAME]}"])
    process.wait_until(lambda: json.loads(urllib.request.urlopen(
        client + "/health", timeout=2).read())["health"] == "true", 30, "etcd")
    process.log(f"etcd on {stack.ports[NAME]}")


def flush(stack):
    """Delete every key (the backend losing its data: members, locks, all); returns how
    many were deleted."""
    everything = {"key": "AA==", "range_end": "AA=="}  # "\0" to "\0": the whole keyspace
    request = urllib.request.Request(stack.etcd_url + "/v3/kv/deleterange",
                                     data=json.dumps(everything).encode(), method="POST")
    return int(json.loads(urllib.request.urlopen(request, timeout=5).read()).get("deleted", 0))
