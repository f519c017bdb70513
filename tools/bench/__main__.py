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

"""Benchmarks on the real local stack; they print figures and assert nothing.

    tox -e bench                               # every figure below, in one run
    tox -e bench -- --database sqlite          # the same on the embedded sqlite stack
    tox -e bench -- compare --nodes 1000 3000 10000  # against nova's SchedulerReportClient
    tox -e bench -- latency --nodes 10000 --toggles 200 --agents 4
    tox -e bench -- ring
    tox -e bench -- rss --nodes 100000          # the listings come from a stub (labelled)
    tox -e bench -- reshaper --nodes 1000       # POST /reshaper as a bulk path
    tox -e bench -- reconcile --nodes 1000      # ours alone, plus a cold new process
    tox -e bench -- sweep --nodes 1000 --workers 4 8 16 32 --bulk-batch 100 250
    tox -e bench -- fleet --nodes 10000 --agents 1 2 4 8  # cost per interval as agents are added
    tox -e bench -- scale --nodes 100000 --agents 1 4     # 10^5 in the real services (MariaDB)
    tox -e bench -- nova-scale --nodes 1000     # real nova-compute services at fleet size
    tox -e bench -- changes-listing --nodes 1000  # nova's node refresh in a mass deploy
    tox -e bench -- nova-storm --nodes 1000     # many servers asked at once, beside stock nova

Every contender runs against the same kind of Placement: by default Placement
(and Ironic) on MariaDB, one private mariadbd per stack with a database per
service, Placement under several gunicorn workers, as a deployment runs it
(tools/localstack/); ``--database sqlite`` gives the embedded stack (one
Placement worker thread).  Auth is noauth throughout (Keystone would add the
same token validation to every contender).  Each figure is saved with the
machine's 1-minute load average when it was taken ("load").

compare: initial sync, a pass with nothing changed, a new process, and a
drift of 1% of the nodes: ours, nova's report client driven the way
nova-compute's resource tracker drives it, and a bare loop of the minimal
writes (and the two listings a pass cannot avoid), each on its own real
Placement.

latency: N nodes (of which --available go through to 'available', so a
maintenance toggle changes what Placement must show), --agents agents on a
Redis ring with notifications; toggles maintenance one node at a time and times
each from the Ironic API call returning to Placement showing the new reserved
value (polled), then a burst of 1,000 changes, plus the agents' own
event-to-write histogram.

ring: balance (max/mean load) and the fraction of nodes that move for 3->4,
4->3 and 8->9 members at 10,000 and 100,000 nodes, against the ideal 1/M.

rss: peak RSS of one agent's state for 100,000 nodes, and the no-change pass
at that size against the stub's listings (the curve's labelled last point).

scale: 10^5 nodes and providers in the real Ironic and Placement (copies of
rows made through the APIs, written into their databases), one agent and then
four with state files: their new-process and warm passes against the two bare
listings, the fast path under four agents, and each agent's peak RSS.

sweep: the initial sync of the same nodes at each [reconcile] workers x
bulk_batch, each on a fresh Placement.

The new-process figures run with [DEFAULT] state_path (as an operator
configures it: the observation cache is restored from the state file) and
without it (every provider read); --reverify also times a new process at
other [reconcile] reverify_passes.

Figures go to stdout as tables and to bench-results/ (JSON, summary.md with
the targets checked, bench.png, and curve.png / curve.md: cost per node
against the number of nodes).

Each benchmark is the module of tools/bench/ named after its subcommand; what
they share is tools/bench/common.py, the summary and plots tools/bench/report.py.
The soaks are commands of their own beside them, saving to bench-results/ too:
``python -m tools.bench.soak`` (tox -e soak) and ``python -m tools.bench.fault_soak``
(tox -e fault-soak).  nova-scale is described in tools/bench/nova_scale.py (it runs the
whole nova of the nova-cloud profile, with this environment's nova-compute).
"""

import argparse

from tools import localstack
from tools.bench import changes_listing
from tools.bench import common
from tools.bench import compare
from tools.bench import fleet
from tools.bench import latency
from tools.bench import nova_scale
from tools.bench import nova_storm
from tools.bench import reconcile
from tools.bench import report
from tools.bench import reshaper
from tools.bench import ring
from tools.bench import rss
from tools.bench import scale
from tools.bench import sweep

# The benchmarks that run on their own and print their own table (no summary).
ALONE = {"reconcile": reconcile, "latency": latency, "ring": ring, "sweep": sweep,
         "reshaper": reshaper, "fleet": fleet, "scale": scale, "nova-scale": nova_scale,
         "nova-storm": nova_storm, "changes-listing": changes_listing}


def parser():
    """The command line: one subcommand per benchmark, ``all`` (the default) for every
    figure the summary checks."""
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--database", choices=["mariadb", "sqlite"], default=argparse.SUPPRESS,
                        help="Placement's (and Ironic's) database for every contender: "
                             "MariaDB with several gunicorn workers (the default), or "
                             "sqlite with one worker thread (the embedded test stack)")
    top = argparse.ArgumentParser(prog="python -m tools.bench", parents=[shared],
                                  description=__doc__.splitlines()[0])
    sub = top.add_subparsers(dest="bench")
    all_cmd = sub.add_parser("all", help="every figure of issue 14 in one run (the default)",
                             parents=[shared])
    reconcile_cmd = sub.add_parser("reconcile", parents=[shared])
    reconcile_cmd.add_argument("--nodes", type=int, default=1000)
    latency_cmd = sub.add_parser("latency", parents=[shared])
    latency_cmd.add_argument("--nodes", type=int, default=10_000)
    latency_cmd.add_argument("--available", type=int, default=100)
    latency_cmd.add_argument("--toggles", type=int, default=200)
    latency_cmd.add_argument("--agents", type=int, default=4,
                             help="on a Redis ring when more than 1")
    fleet_cmd = sub.add_parser("fleet", help="Ironic's, Placement's and the broker's CPU per "
                               "interval as agents are added", parents=[shared])
    fleet_cmd.add_argument("--nodes", type=int, default=10_000)
    fleet_cmd.add_argument("--agents", type=int, nargs="+", default=[1, 2, 4, 8])
    fleet_cmd.add_argument("--interval", type=int, default=120,
                           help="[reconcile] interval of every agent (s)")
    fleet_cmd.add_argument("--intervals", type=int, default=3,
                           help="each window's length, in intervals")
    fleet_cmd.add_argument("--drift", type=float, default=0.01,
                           help="share of the nodes changed each interval in the drift window")
    fleet_cmd.add_argument("--settle-timeout", type=int, default=900)
    fleet_cmd.add_argument("--set", nargs="*", default=[], metavar="SECTION.OPTION=VALUE",
                           help="agent configuration over the bench's, for every variant")
    fleet_cmd.add_argument("--variants", nargs="+", metavar="NAME[:SECTION.OPTION=VALUE,...]",
                           default=["each-lists:reconcile.share_listing=false",
                                    "shared:reconcile.share_listing=true"],
                           help="agent configurations compared in one run, each over every "
                                "agent count (default: every agent listing for itself, as "
                                "before the shared listing, against the shared listing)")
    scale_cmd = sub.add_parser("scale", help="10^5 nodes in the real Ironic and Placement: "
                               "one and four agents' passes, the fast path, peak RSS",
                               parents=[shared])
    scale_cmd.add_argument("--nodes", type=int, default=100_000)
    scale_cmd.add_argument("--available", type=int, default=100)
    scale_cmd.add_argument("--agents", type=int, nargs="+", default=[1, 4])
    scale_cmd.add_argument("--interval", type=int, default=90,
                           help="[reconcile] interval of every agent (s)")
    scale_cmd.add_argument("--passes", type=int, default=3,
                           help="passes per agent: the first (a new process), then warm")
    scale_cmd.add_argument("--toggles", type=int, default=200)
    nova_scale.add_arguments(sub.add_parser(
        "nova-scale", help="real nova-compute services over thousands of Ironic nodes: stock "
        "nova with one service and with shards, rp_reporter's driver on the ring",
        parents=[shared]))
    nova_storm.add_arguments(sub.add_parser(
        "nova-storm", help="many servers asked at once at fleet size: rp_reporter's driver "
        "and stock nova's, with nova's and Placement's defaults and the recommended settings",
        parents=[shared]))
    changes_listing.add_arguments(sub.add_parser(
        "changes-listing", help="nova's node refresh during a mass deploy and a mass "
        "cleaning: the driver's listing of what changed against nova's whole listing",
        parents=[shared]))
    ring_cmd = sub.add_parser("ring", parents=[shared])
    ring_cmd.add_argument("--partitions", type=int, default=1024)
    compare_cmd = sub.add_parser("compare", help="side by side with nova's report client",
                                 parents=[shared])
    rss_cmd = sub.add_parser("rss", help="peak RSS of one agent's state (listings from a stub)",
                             parents=[shared])
    rss_cmd.add_argument("--nodes", type=int, default=100_000)
    reshaper_cmd = sub.add_parser("reshaper", help="POST /reshaper as a bulk inventory path",
                                  parents=[shared])
    reshaper_cmd.add_argument("--nodes", type=int, default=1000)
    reshaper_cmd.add_argument("--batches", type=int, nargs="+", default=[50, 100, 250])
    sweep_cmd = sub.add_parser("sweep", help="initial sync at each [reconcile] workers x "
                                             "bulk_batch", parents=[shared])
    sweep_cmd.add_argument("--nodes", type=int, default=1000)
    sweep_cmd.add_argument("--workers", type=int, nargs="+", default=[4, 8, 16, 32])
    sweep_cmd.add_argument("--bulk-batch", type=int, nargs="+", default=[100])
    for p in (compare_cmd, all_cmd, reconcile_cmd):
        p.add_argument("--workers", type=int, help="[reconcile] workers (default: the option's)")
        p.add_argument("--bulk-batch", type=int, help="[reconcile] bulk_batch")
        p.add_argument("--reverify-passes", type=int, help="[reconcile] reverify_passes")
    for p in (compare_cmd, all_cmd):
        # Largest first: the machine is often busiest early in a run (tox installing,
        # other jobs finishing); the 1,000-node size carries the ratio against nova.
        p.add_argument("--nodes", type=int, nargs="+", default=[10_000, 3000, 1000])
        p.add_argument("--nova-max-nodes", type=int, default=1000,
                       help="nova's pass is quadratic in the nodes: hours at the larger sizes")
        p.add_argument("--reverify", type=int, nargs="*", default=[32, 128, 256],
                       help="also a new process at each of these [reconcile] reverify_passes")
        p.add_argument("--reverify-min-nodes", type=int, default=10_000,
                       help="... at this many nodes and more")
    return top, sub.choices


def main(argv=None):
    top, commands = parser()
    args = top.parse_args(argv)
    localstack.exit_on_sigterm()  # a stopped run stops its stacks too
    common.use_database(getattr(args, "database", common.DATABASE))
    print(f"every contender on Placement with {common.DATABASE}; load {common.load()}",
          flush=True)
    if args.bench in ALONE:
        return ALONE[args.bench].run(args)
    if args.bench == "rss":
        return report.write({"database": common.DATABASE, "rss": rss.run(args)})
    if args.bench == "compare":
        return report.write({"database": common.DATABASE, "compare": compare.run(args)})
    args = args if args.bench else commands["all"].parse_args([])
    results = {"database": common.DATABASE}
    for name, run in (("compare", lambda: compare.run(args)),
                      ("latency", lambda: latency.run(commands["latency"].parse_args([]))),
                      ("ring", lambda: ring.run(commands["ring"].parse_args([]))),
                      ("rss", lambda: rss.run(commands["rss"].parse_args([])))):
        try:
            results[name] = run()
        except Exception as e:  # noqa: BLE001 - one failed benchmark keeps the others' figures
            print(f"{name} failed: {e!r}", flush=True)
            results[f"{name}_failed"] = repr(e)
        report.write(results)  # after each: a later failure loses nothing


if __name__ == "__main__":
    main()
