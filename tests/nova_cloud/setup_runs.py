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

"""The nova-cloud suite's setup alone, N times in a row: the stack, nova's API and every
topology started, then stopped.  Prints one JSON row per run (seconds, the test clients'
repeated requests, Ironic's listen overflows) and exits non-zero if any run failed or
repeated a request.

    .tox/nova-cloud/bin/python -m tests.nova_cloud.setup_runs 10
"""

import json
import pathlib
import subprocess
import sys
import tempfile
import time

from tests.nova_cloud.conftest import whole_cloud


def listen_overflows():
    """The kernel's count of connections dropped from a full accept queue."""
    out = subprocess.run(["nstat", "-az", "TcpExtListenOverflows"], capture_output=True,
                         text=True, check=False).stdout.split()
    return int(out[out.index("TcpExtListenOverflows") + 1]) if "TcpExtListenOverflows" in out \
        else None


def one_run(number):
    started, overflows = time.monotonic(), listen_overflows()
    row = {"run": number}
    try:
        with tempfile.TemporaryDirectory(prefix="nova-cloud-setup-") as workdir:
            with whole_cloud(pathlib.Path(workdir)) as cloud:
                row["up_s"] = round(time.monotonic() - started, 1)
                row["repeats"] = cloud.results["setup_repeats"]
                row["nodes"] = sum(len(t.nodes) for t in cloud.topologies.values())
    except Exception as e:  # noqa: BLE001  (a failed run is a row, and the loop goes on)
        row["error"] = f"{type(e).__name__}: {e}"
    row["listen_overflows"] = (None if overflows is None
                               else listen_overflows() - overflows)
    row["s"] = round(time.monotonic() - started, 1)
    return row


def main(argv):
    rows = []
    for number in range(1, int(argv[0]) + 1):
        rows.append(one_run(number))
        print(json.dumps(rows[-1], sort_keys=True), flush=True)
    bad = [row for row in rows if "error" in row or row.get("repeats")]
    print(f"{len(rows) - len(bad)} of {len(rows)} runs clean")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["10"]))
