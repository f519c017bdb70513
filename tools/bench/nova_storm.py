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

"""nova-storm: many servers asked at once onto a large fleet, beside stock nova.

    tox -e bench -- nova-storm --nodes 1000                 (not in CI)
    tox -e bench -- nova-storm --nodes 10000 --setups rp_reporter --storms 10 50

On the nova-cloud profile (a whole nova on MariaDB behind Keystone), for each fleet
size and setup (nova-scale's: ``rp_reporter``, its driver's three services on the ring
beside two agents; ``stock_shards``, stock nova's driver on three static shards), and
for each group of SETTINGS (Placement's and nova's defaults, then what the operator
guide recommends), storms of ``--storms`` servers asked within one second, each its
own API call from its own thread (as a CI farm asks): one while no periodic of any
service runs (``quiet``), one as a periodic starts (``periodic``).

Per storm: servers ACTIVE, in ERROR (with nova's reason), reschedules (the create
action's build events beyond the first), Placement's 409 answers (its request log, by
what was written), the seconds from each server's create to its launch (p50, p99, max;
nova's own ``created`` and ``launched_at``, whole seconds: the storm's end is only
looked for, every POLL_S, so the benchmark's own listing costs nova-api little), the
servers whose build overlapped a periodic of their service, and the CPU seconds of
every process of the stack, by service and per server built; beside one boot alone on
the same stack and settings (``single_boot_s``).  The servers are deleted, and every
node offered again, before the next storm.  Each row is ``--runs`` storms (3: rows of
one storm differed by 5-10 %), its seconds and CPU the runs' medians with the p99's
spread, its counts the runs' sums.
"""

import collections
import concurrent.futures
import datetime
import os
import re
import statistics
import subprocess
import threading
import time
import uuid

from tools import clients
from tools.bench import common
from tools.bench import nova_scale
from tools.localstack import nova as nova_service
from tools.localstack import process
from tools.wait import NotSeen
from tools.wait import wait_for

SETUPS = ("rp_reporter", "stock_shards")
# Each group: {where: {section: {option: value}}}, None for the service's own default.
# "defaults" takes away what the stack sets of these options.
RANDOMIZED = {
    # Identical single-unit providers come in one order for every request, so
    # concurrent requests all claim the first: every one but one meets a 409 and
    # claims the next.  Shuffled, each request gets its own sample.
    "placement": {"placement": {"randomize_allocation_candidates": "True"}},
    # nova loads a host state for every candidate Placement returns (1,000 by
    # default); shuffled, a hundred are as good a choice and a tenth of the work.
    "scheduler": {"scheduler": {"max_placement_results": "100", "workers": None},
                  "filter_scheduler": {"shuffle_best_same_weighed_hosts": None,
                                       "track_instance_changes": None},
                  "DEFAULT": {"concurrency_backend": None}},
    # An Ironic build holds one of these for the whole deploy, mostly waiting on
    # Ironic: nova's 10 queue a storm's builds behind each other.
    "compute": {"DEFAULT": {"max_concurrent_builds": "50"},
                "filter_scheduler": {"track_instance_changes": None}}}


def _over(settings, where, section, **options):
    """``settings`` with ``options`` set in ``section`` of ``where``."""
    changed = {w: {s: dict(values) for s, values in sections.items()}
               for w, sections in settings.items()}
    changed[where].setdefault(section, {}).update(options)
    return changed


# nova sorts the hosts of Placement's sample by its own weighing, equal for identical
# nodes, so every request still tried the same few first (268 409s in a storm of 100):
# shuffled among the best weighed (an option nova made for Ironic), they rarely meet.
RECOMMENDED = _over(RANDOMIZED, "scheduler", "filter_scheduler",
                    shuffle_best_same_weighed_hosts="True")
SETTINGS = {
    "defaults": {
        "placement": {"placement": {"randomize_allocation_candidates": None}},
        "scheduler": {"scheduler": {"max_placement_results": None, "workers": None},
                      "filter_scheduler": {"shuffle_best_same_weighed_hosts": None,
                                           "track_instance_changes": None},
                      "DEFAULT": {"concurrency_backend": None}},
        "compute": {"DEFAULT": {"max_concurrent_builds": None},
                    "filter_scheduler": {"track_instance_changes": None}}},
    "randomized": RANDOMIZED,
    "recommended": RECOMMENDED,
    # nova 34 runs its controllers on native threads; on them its scheduler read another
    # request's answer from Placement now and then (a build failed): the same settings
    # with nova-scheduler and the superconductor on eventlet (nova's deprecated mode).
    "recommended_eventlet": _over(RECOMMENDED, "scheduler", "DEFAULT",
                                  concurrency_backend="eventlet"),
    # One scheduler process (nova's default is one per core): what a second one buys.
    "recommended_one_scheduler": _over(RECOMMENDED, "scheduler", "scheduler", workers="1"),
    # Placement closing idle connections after 2 s (the stack's: 300 s): a connection
    # nova-scheduler's parent opened before it forked its workers is gone before a storm.
    "recommended_keep_alive_2": _over(RECOMMENDED, "placement", "gunicorn", keep_alive="2"),
    # Each recommendation alone beside the set: fewer candidates, nova's own build
    # limit and one between, the scheduler's record of each host's instances off.
    "recommended_results_25": _over(RECOMMENDED, "scheduler", "scheduler",
                                    max_placement_results="25"),
    "recommended_builds_10": _over(RECOMMENDED, "compute", "DEFAULT",
                                   max_concurrent_builds="10"),
    "recommended_builds_15": _over(RECOMMENDED, "compute", "DEFAULT",
                                   max_concurrent_builds="15"),
    "recommended_untracked": _over(
        _over(RECOMMENDED, "scheduler", "filter_scheduler", track_instance_changes="False"),
        "compute", "filter_scheduler", track_instance_changes="False"),
}
WHEN = ("quiet", "periodic")
# nova-scheduler's lines for an answer of Placement it could not read: on nova 34's native
# threads, storms showed another request's bytes where a status line or JSON should be.
UNREADABLE = re.compile(r"Placement API service is not responding|JSONDecodeError")
RECORD = re.compile(r"^\S+ \S+ \d+ (?:WARNING|ERROR) \S+ \[")  # a traceback line has no [
# Only to see a storm end (its seconds are nova's own): a listing every half second was
# most of nova-api's CPU in a storm.
POLL_S = 5
# A row's figures over its runs: these the runs' medians, the counts their sums.
MEDIANS = ("p50_s", "p99_s", "max_s", "scheduler_cpu_s", "placement_cpu_s")
SUMS = ("active", "error", "reschedules", "placement_409", "scheduler_unreadable_answers",
        "during_periodic")


def apply_settings(stack, setup, settings, restart_computes=True):
    """Placement's and the controllers' configuration set to ``settings`` (each service
    restarted); the setup's nova-computes' too, restarted (``restart_computes``) when
    that changed it."""
    conf_dir = stack.service_dir("placement")
    placement = dict(settings["placement"])
    # gunicorn's, not placement.conf's: Placement's idle keep-alive (None: the stack's)
    stack.placement_keep_alive_s = placement.pop("gunicorn", {}).get("keep_alive")
    process.update_ini(os.path.join(conf_dir, "placement.conf"), placement)
    stack.restart("placement")
    process.update_ini(os.path.join(nova_service.conf_dir(stack), "nova.conf"),
                       settings["scheduler"])
    process.stop_all(nova_service.controllers(stack))
    nova_service.start_controllers(stack)
    changed = False
    for section, values in settings["compute"].items():
        current = setup.sections.setdefault(section, {})
        for option, value in values.items():
            changed |= current.get(option) != value
            if value is None:
                current.pop(option, None)
            else:
                current[option] = value
    if changed and restart_computes:
        for host in setup.hosts:
            setup.start_service(host)


USERS = re.compile(r'\("([^"]*)",pid=(\d+),fd=(\d+)\)')


def to_port(ss_lines, port):
    """The lines of ``ss -tnpH`` whose peer is 127.0.0.1:``port``."""
    return [line for line in ss_lines
            if len(line.split()) >= 5 and line.split()[3] == f"127.0.0.1:{port}"]


def shared_connections(ss_lines, port):
    """The connections to 127.0.0.1:``port`` that more than one process holds, from
    ``ss -tnpH state established`` (``users:(("nova-scheduler",pid=1,fd=9),(...))``): a
    keep-alive connection opened before a fork is held by the parent and every child
    it forked, whose requests then share one socket and read each other's answers.
    [(local address, [pid, ...])]."""
    found = []
    for line in to_port(ss_lines, port):
        fields = line.split()
        pids = sorted({int(pid) for _, pid, _ in USERS.findall(line)})
        if len(pids) > 1:
            found.append((fields[2], pids))
    return found


def scheduler_connections(stack):
    """nova-scheduler's connections to Placement now: {"connections": how many,
    "shared": [(local address, [pid, ...]) of those more than one process holds]}."""
    lines = subprocess.run(["ss", "-tnpH", "state", "established"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    ours = [line for line in lines if '"nova-schedule' in line]
    port = stack.ports["placement"]
    return {"connections": len(to_port(ours, port)),
            "shared": shared_connections(ours, port)}


def all_offered(setup, timeout):
    wait_for(lambda: len(setup.placement.offered(setup.placement_class)) >= setup.nodes,
             timeout, f"{setup.name}: every node offered", interval=2)


def wait_for_moment(logs, when, timeout):
    """Until no periodic of any service runs (``quiet``), or one starts (``periodic``);
    whether it came within ``timeout``."""
    if when == "quiet":
        def ready():
            now = time.time()
            return not any(nova_scale.during_periodic(log, now, now, now)
                           for log in logs.values())
    else:
        offsets = {host: os.path.getsize(log) for host, log in logs.items()}

        def ready():
            for host, log in logs.items():
                with open(log, errors="replace") as f:
                    f.seek(offsets[host])
                    if any(nova_scale.STARTED in line for line in f):
                        return True
            return False
    try:
        # A quiet moment reads every service's whole log; a start reads what was added.
        wait_for(ready, timeout, f"a {when} moment", interval=1 if when == "quiet" else 0.2)
        return True
    except NotSeen:
        return False


def unreadable_answers(log_path, offset):
    """nova-scheduler's log records (their first lines, not their tracebacks) from byte
    ``offset`` saying an answer of Placement could not be read."""
    with open(log_path, errors="replace") as f:
        f.seek(offset)
        return sum(1 for line in f if RECORD.match(line) and UNREADABLE.search(line))


def placement_409s(log_path, offset):
    """Placement's 409 answers logged from byte ``offset``, by what was written."""
    found = collections.Counter()
    with open(log_path, errors="replace") as f:
        f.seek(offset)
        for line in f:
            if "status: 409" in line:
                kind = ("allocations" if "/allocations" in line
                        else "inventories" if "/inventories" in line else "other")
                found[kind] += 1
    return dict(found)


def ask(nova, flavor, prefix, count):
    """``count`` servers asked together, each by its own thread once all are ready:
    ({server: asked at}, [nova-api's answer to each request it refused])."""
    ready = threading.Barrier(count)

    def one(i):
        ready.wait()
        asked = time.time()
        try:
            return nova.boot(f"{prefix}-{i}", flavor), asked
        except AssertionError as e:
            return None, str(e)
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        answers = list(pool.map(one, range(count)))
    return ({server: at for server, at in answers if server},
            [refusal for server, refusal in answers if not server])


def _utc(stamp):
    """nova's timestamp (``2026-12-06T21:04:42Z``, ``2026-12-06T21:04:47.000000``) as an
    aware datetime."""
    found = datetime.datetime.fromisoformat(stamp.rstrip("Z"))
    return found.replace(tzinfo=datetime.timezone.utc)


def launched(record):
    """(seconds from nova-api's create of the server to its launch, the launch's epoch
    time) by nova's own timestamps, or None for a server never launched."""
    at = record.get("OS-SRV-USG:launched_at")
    if not at:
        return None
    took = (_utc(at) - _utc(record["created"])).total_seconds()
    return took, _utc(at).timestamp()


def by_service(used, built):
    """CPU seconds a server built, by service (a setup's nova-computes as one)."""
    found = collections.Counter()
    for name, seconds in used.items():
        found["nova-compute" if name.startswith("nova-compute") else name] += seconds
    return {name: round(seconds / built, 2) for name, seconds in sorted(found.items())
            if built and seconds / built >= 0.005}


def combined(runs):
    """One row of ``runs`` (each storm's figures): the medians of MEDIANS and of each
    service's CPU a build, the p99's spread (max - min) and each run's p99, the sums of
    SUMS, every error's reason, unfinished server and refusal."""
    row = {"runs": len(runs), "storm": runs[0]["storm"], "when": runs[0]["when"],
           "moment_found": all(r["moment_found"] for r in runs)}
    for key in MEDIANS:
        values = [r[key] for r in runs if r[key] is not None]
        row[key] = round(statistics.median(values), 2) if values else None
    p99s = [r["p99_s"] for r in runs if r["p99_s"] is not None]
    row["p99_runs_s"] = p99s
    row["p99_spread_s"] = round(max(p99s) - min(p99s), 2) if p99s else None
    for key in SUMS:
        row[key] = sum(r[key] for r in runs)
    services = sorted({name for r in runs for name in r["cpu_per_build_s"]})
    row["cpu_per_build_s"] = {name: round(statistics.median(
        r["cpu_per_build_s"].get(name, 0) for r in runs), 2) for name in services}
    row["error_reasons"] = dict(sum((collections.Counter(r["error_reasons"]) for r in runs),
                                    collections.Counter()))
    row["unfinished"] = [u for r in runs for u in r["unfinished"]]
    row["refused"] = [u for r in runs for u in r["refused"]]
    row["placement_409_by_write"] = dict(sum(
        (collections.Counter(r["placement_409_by_write"]) for r in runs),
        collections.Counter()))
    row["load"] = max(r["load"] for r in runs)
    return row


def built(nova, prefix, asked, timeout):
    """({server: (its record once ACTIVE or ERROR, when seen so)}, {server: its record}
    of those neither within ``timeout``): one listing of the storm's servers every
    POLL_S (one request, whatever the storm's size)."""
    seen, last, deadline = {}, {}, time.monotonic() + timeout
    while len(seen) < len(asked) and time.monotonic() < deadline:
        now = time.time()
        try:
            listed = nova.servers(prefix)
        except AssertionError as e:  # nova-api's 500 (its neutron calls in a storm): again
            print(f"listing the storm's servers: {e}", flush=True)
            listed = ()
        for server in listed:
            last[server["id"]] = server
            if server["id"] in asked and server["id"] not in seen and server["status"] in (
                    "ACTIVE", "ERROR"):
                seen[server["id"]] = (server, now)
        time.sleep(POLL_S)
    return seen, {s: last.get(s, {}) for s in asked if s not in seen}


def storm(stack, setup, nova, flavor, logs, count, when, timeout, build_timeout):
    """``count`` servers asked at once at a ``when`` moment: the storm's figures."""
    moment = wait_for_moment(logs, when, 2 * int(setup.sections["DEFAULT"][
        "update_resources_interval"]) + 60)
    placement_log = os.path.join(stack.workdir, "placement.log")
    offset = os.path.getsize(placement_log)
    scheduler_log = os.path.join(stack.workdir, "nova-scheduler.log")
    scheduler_offset = os.path.getsize(scheduler_log)
    cpu_before = nova_scale.cpu_by_service(stack, setup)
    prefix = f"storm-{uuid.uuid4().hex[:8]}"
    asked, refused = ask(nova, flavor, prefix, count)
    try:
        return _figures(stack, setup, nova, logs, asked, prefix, build_timeout, cpu_before,
                        (placement_log, offset), (scheduler_log, scheduler_offset),
                        dict(storm=count, when=when, moment_found=moment, refused=refused))
    finally:  # the next storm finds every node free
        for server in asked:
            _patient(nova.delete, server)
        for server in asked:
            nova.wait_gone(server, timeout)
        all_offered(setup, timeout)


def _patient(call, *args, tries=5):
    """``call(*args)``, again after nova-api's 500s (its neutron calls under a storm)."""
    for attempt in range(tries):
        try:
            return call(*args)
        except AssertionError:
            if attempt == tries - 1:
                raise
            time.sleep(2)


def _figures(stack, setup, nova, logs, asked, prefix, build_timeout, cpu_before, placement,
             scheduler, figures):
    """The storm's figures once its servers are built (or not within ``build_timeout``)."""
    seen, unfinished = built(nova, prefix, asked, build_timeout)
    cpu = nova_scale.cpu_by_service(stack, setup)
    used = {name: round(cpu[name] - cpu_before.get(name, 0), 1) for name in cpu}
    launches = {s: launched(record) for s, (record, _) in seen.items()
                if record["status"] == "ACTIVE"}
    took = {s: found[0] for s, found in launches.items() if found}
    errors = [s for s, (record, _) in seen.items() if record["status"] == "ERROR"]
    reasons = collections.Counter((_patient(nova.wait_built, s, 5).get("fault") or {}).get(
        "message", "no fault") for s in errors)
    spans = {host: nova_scale.periodic_spans(log) for host, log in logs.items()}  # each read once
    overlapped = sum(1 for s, (record, at) in seen.items() if nova_scale.overlaps(
        spans.get(record.get("OS-EXT-SRV-ATTR:host"), ()), asked[s],
        (launches.get(s) or (None, at))[1]))
    figures.update({
        "asked_within_s": round(max(asked.values()) - min(asked.values()), 2) if asked else None,
        "active": len(took), "error": len(errors), "error_reasons": dict(reasons),
        # Neither ACTIVE nor ERROR within the build timeout: status and task state.
        "unfinished": [[s, r.get("status"), r.get("OS-EXT-STS:task_state")]
                       for s, r in unfinished.items()],
        "reschedules": sum(max(_patient(nova.attempts, s) - 1, 0) for s in asked),
        "placement_409_by_write": placement_409s(*placement),
        "scheduler_unreadable_answers": unreadable_answers(*scheduler),
        "during_periodic": overlapped,
        "p50_s": _q(took, 50), "p99_s": _q(took, 99),
        "max_s": round(max(took.values()), 2) if took else None,
        "scheduler_cpu_s": sum(v for k, v in used.items() if k.startswith("nova-scheduler")),
        "placement_cpu_s": used.get("placement"),
        "cpu_s": {k: v for k, v in sorted(used.items(), key=lambda kv: -kv[1]) if v >= 0.5},
        "cpu_per_build_s": by_service(used, len(took)),
        "load": common.load()})
    figures["placement_409"] = sum(figures["placement_409_by_write"].values())
    return figures


def _q(took, q):
    return round(common.percentile(list(took.values()), q), 2) if took else None


def measure(stack, name, nodes, args, workdir):
    """One setup at one fleet size: a row per settings, storm and moment."""
    setup = nova_scale.Setup(stack, name, nodes, args.periodic,
                             os.path.join(workdir, f"{name}-{nodes}"), args.nova,
                             args.full_pass_every if name == "rp_reporter" else 1)
    os.makedirs(setup.workdir, exist_ok=True)
    made = time.monotonic()
    setup.make_nodes()
    print(f"{name}: {nodes} nodes in Ironic in {time.monotonic() - made:.0f} s", flush=True)
    nova = clients.Nova(stack)
    flavor = nova.flavor(f"bm-{setup.resource_class}", setup.placement_class)
    base = {"nodes": nodes, "setup": name, "services": len(setup.hosts),
            "release": stack.release.name, "periodic_interval_s": args.periodic,
            "full_pass_every": setup.full_pass_every, "nova_settings": args.nova}
    rows = []
    first = SETTINGS[args.settings[0]]
    apply_settings(stack, setup, first, restart_computes=False)
    setup.start_agents()
    if setup.agents:
        setup.agents_done(args.timeout)
    started = time.monotonic()
    logs = setup.start_services()
    try:
        all_offered(setup, args.timeout)
        print(f"{name}: every node offered {time.monotonic() - started:.0f} s after the "
              "services' start", flush=True)
        stack.wait_compute_mapped(*setup.hosts, by_service=True)
        wait_for(lambda: all(nova_scale.periodics(log) for log in logs.values()),
                 args.timeout, f"{name}: a whole periodic of every service", interval=5)
        for label in args.settings:
            if label != args.settings[0]:
                apply_settings(stack, setup, SETTINGS[label])
                all_offered(setup, args.timeout)
            connections = scheduler_connections(stack)
            print(f"{name} {label}: nova-scheduler's connections to Placement: "
                  f"{connections}", flush=True)
            alone = combined([storm(stack, setup, nova, flavor, logs, 1, "quiet",
                                    args.timeout, args.build_timeout)
                              for _ in range(args.runs)])
            for count in args.storms:
                for when in args.when:
                    row = dict(base, settings=label, settings_set=SETTINGS[label],
                               scheduler_placement_connections=connections,
                               single_boot_s=alone["max_s"], **combined([
                                   storm(stack, setup, nova, flavor, logs, count, when,
                                         args.timeout, args.build_timeout)
                                   for _ in range(args.runs)]))
                    rows.append(row)
                    print(_line(row), flush=True)
                    args.save(rows)
    except Exception as e:  # noqa: BLE001 - the storms measured so far are kept
        rows.append(dict(base, failed=repr(e)))
    finally:
        setup.stop()
    return rows


def _line(row):
    return (f"{row['setup']} {row['nodes']} {row['settings']} storm {row['storm']} "
            f"{row['when']} ({row['runs']} runs): {row['active']} ACTIVE, "
            f"{row['error']} ERROR, {row['reschedules']} reschedules, "
            f"{row['placement_409']} 409s, p50 {row['p50_s']} p99 {row['p99_s']} (spread "
            f"{row['p99_spread_s']}) max {row['max_s']} s (one alone {row['single_boot_s']} "
            f"s), CPU a build {row['cpu_per_build_s']}")


def run(args):
    return nova_scale.each_setup(args, "nova-storm", measure)


def add_arguments(parser):
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000])
    parser.add_argument("--setups", nargs="+", choices=SETUPS, default=list(SETUPS))
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS),
                        default=["defaults", "recommended"])
    parser.add_argument("--storms", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--when", nargs="+", choices=WHEN, default=list(WHEN))
    parser.add_argument("--runs", type=int, default=3,
                        help="storms a row: its seconds and CPU their medians")
    parser.add_argument("--periodic", type=int, default=60,
                        help="nova-compute's update_resources_interval (s)")
    parser.add_argument("--full-pass-every", type=int, default=10,
                        help="rp_reporter's services: [rp_reporter] full_pass_every")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--build-timeout", type=float, default=300,
                        help="a storm's servers neither ACTIVE nor ERROR after this are "
                             "counted unfinished (and deleted)")
    parser.add_argument("--nova", nargs="*", default=[], metavar="SECTION.OPTION=VALUE",
                        help="nova.conf settings of every setup's services, over the bench's")
