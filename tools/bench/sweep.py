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

"""sweep: the initial sync at each [reconcile] workers x bulk_batch."""

import tempfile

from rp_reporter import wiring
from tools import clients
from tools.bench import common


def run(args):
    """Initial sync of the same nodes at each [reconcile] workers x bulk_batch, each on a
    fresh Placement (its own MariaDB), then a pass with nothing changed."""
    workdir = tempfile.mkdtemp(prefix="rp-bench-")
    stack = common.new_stack(workdir)
    results = []
    try:
        common.start(stack, ["rabbitmq", "ironic"])
        ironic = clients.Ironic(stack.ironic_url, "sweep")
        common.load_many(stack, ironic, args.nodes)
        for workers in args.workers:
            for batch in args.bulk_batch:
                placement = common.new_stack()
                try:
                    common.start(placement, ["placement"])
                    stack.ports["placement"] = placement.ports["placement"]
                    conf, _ = common.confs(stack, tempfile.mkdtemp(prefix="rp-sweep-"),
                                           "sweep", workers=workers, bulk_batch=batch)
                    reconciler = wiring.reconciler(conf)
                    row = common.figures("initial", reconciler.run(), args.nodes)
                    quiet = reconciler.run()
                    results.append({"workers": workers, "bulk_batch": batch,
                                    "initial_s": row["seconds"],
                                    "nodes_per_s": round(args.nodes / row["seconds"], 1),
                                    "requests": sum(row["requests"].values()),
                                    "failed": row["failed"],
                                    "no_change_s": round(quiet.seconds, 2),
                                    "load": common.load(), "database": common.DATABASE})
                    common.print_table(results[-1:], tuple(results[-1]))
                finally:
                    placement.stop()
    finally:
        stack.stop()
    common.print_table(results, tuple(results[0]) if results else ())
    common.save(results, f"sweep-{args.nodes}")
    return results
