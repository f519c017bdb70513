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

"""reconcile: ours alone on N nodes: the initial sync, a pass with nothing changed
(warm, and a new process with and without its state file), and a drift of 1%."""

import tempfile
import time

from rp_reporter import wiring
from tools import clients
from tools.bench import common


def run(args):
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = common.new_stack(workdir)
    results = []
    try:
        common.start(stack, ["rabbitmq", "placement", "ironic"])
        ironic = clients.Ironic(stack.ironic_url, "bench")
        started = time.monotonic()
        nodes = common.load_many(stack, ironic, args.nodes)
        print(f"loaded {len(nodes)} nodes into Ironic in {time.monotonic() - started:.1f} s",
              flush=True)
        conf, stateless = common.confs(stack, workdir, "bench", args)
        reconciler = wiring.reconciler(conf)
        results.append(common.figures("initial", reconciler.run(), len(nodes)))
        results.append(common.figures("no change (warm)", reconciler.run(), len(nodes)))
        results.append(common.figures("no change (new process, state file)",
                                      common.new_process(conf), len(nodes)))
        results.append(common.figures("no change (new process, no state file)",
                                      common.new_process(stateless), len(nodes)))
        drift = nodes[1:: 100]  # nodes without traits: each drift is one trait write
        for uuid in drift:
            ironic.set_traits(uuid, ["CUSTOM_DRIFT"])
        summary = reconciler.run()
        results.append(common.figures(f"drift of {len(drift)} nodes", summary, len(nodes)))
    finally:
        stack.stop()
    common.print_table(results, ("pass", "seconds", "writes", "writes_per_node", "reads",
                                 "failed", "load"))
    common.save(results, "reconcile")
