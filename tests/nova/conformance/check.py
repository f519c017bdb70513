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

"""nova's own Ironic driver test module as the conformance suite of rp_reporter.nova_compute.

    python -m tests.nova.conformance.check                     # (tox -e nova runs it)
    python -m tests.nova.conformance.check --record-baseline   # after a nova upgrade

Runs ``nova/tests/unit/virt/ironic/test_driver.py`` as shipped in the installed
nova, with nova's runner (stestr), on ``rp_reporter.nova_compute.IronicDriver``
(tests/nova/conformance/on_ours), and compares it with the same module on nova's own
``IronicDriver``.  Fails when a test that passes on nova's class fails on ours and
is not listed in tests/nova/conformance/deliberate_differences.txt, or when a listed one
passes on ours (the list would be stale) or does not pass on nova's.

nova's own run is the same for every run of one nova release (its class does not
change), so it is recorded per release, in tests/nova/conformance/baselines/nova-<version>.json
(one for each maintained release's nova: tox -e nova-2025.1 ... nova-2026.2); it is run,
and recorded, for a release with no record (or with ``--record-baseline``, which
rewrites the release's file).
"""

import argparse
import importlib.metadata
import io
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import nova
import subunit
import testtools

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
DIFFERENCES = HERE / "deliberate_differences.txt"
BASELINES = HERE / "baselines"
MODULE = "nova.tests.unit.virt.ironic.test_driver"
SITE = pathlib.Path(nova.__file__).resolve().parent.parent


def deliberate_differences(path=DIFFERENCES):
    """{test id: reason} from the list file."""
    listed = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            test_id, _, reason = line.partition("|")
            if not reason.strip():
                raise SystemExit(f"{path}: {test_id.strip()} has no reason")
            listed[test_id.strip()] = reason.strip()
    return listed


def _statuses(subunit_bytes):
    statuses = {}

    def note(test):
        if test["id"].startswith(MODULE) and test["status"] not in ("exists", "inprogress"):
            statuses[test["id"]] = test["status"]

    result = testtools.StreamToDict(note)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(io.BytesIO(subunit_bytes)).run(result)
    finally:
        result.stopTestRun()
    return statuses


def run(which, concurrency=None):
    """{test id: status} of nova's module on ``which`` ("nova" or "ours"), and seconds."""
    if which == "nova":
        test_path, top_dir = SITE / "nova/tests/unit/virt/ironic", SITE
    else:
        test_path, top_dir = HERE / "on_ours", REPO
    # PYTHONHASHSEED: ddt names some of nova's tests after the order of a set.
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    stestr = [sys.executable, "-m", "stestr", "--test-path", str(test_path),
              "--top-dir", str(top_dir)]
    with tempfile.TemporaryDirectory(prefix=f"nova-module-{which}-") as work:
        started = time.monotonic()
        args = ["run", "--subunit"]
        if concurrency:
            args += ["--concurrency", str(concurrency)]
        args.append(MODULE.replace(".", r"\."))  # a filter: the module alone
        proc = subprocess.run(stestr + args, cwd=work, env=env, capture_output=True,
                              timeout=1800)
        seconds = time.monotonic() - started
    statuses = _statuses(proc.stdout)
    if not statuses:
        sys.stderr.write(proc.stderr.decode(errors="replace")[-4000:])
        raise SystemExit(f"nova's test module did not run on {which}'s class")
    return statuses, seconds


def compare(nova_results, ours_results, listed):
    """Problems (strings; none means conformant) and a summary line per class."""
    problems = []
    passed_nova = {t for t, s in nova_results.items() if s == "success"}
    passed_ours = {t for t, s in ours_results.items() if s == "success"}
    for test in sorted(passed_nova - passed_ours - set(listed)):
        problems.append(f"fails on ours, passes on nova's, not listed: {test} "
                        f"({ours_results.get(test, 'not run')})")
    for test in sorted(set(listed)):
        if test in passed_ours:
            problems.append(f"listed as a deliberate difference but passes on ours: {test}")
        elif test not in passed_nova:
            problems.append(f"listed as a deliberate difference but does not pass on "
                            f"nova's class: {test} ({nova_results.get(test, 'not run')})")
    return problems


def _counts(results):
    counts = {}
    for status in results.values():
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def baseline(nova_version):
    """The file nova's own run on this release is recorded in."""
    return BASELINES / f"nova-{nova_version}.json"


def recorded(nova_version, path=None):
    """{test id: status} of nova's module on nova's class as recorded for this release,
    or None when the record is of another release (or there is none)."""
    path = path or baseline(nova_version)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if record.get("nova") != nova_version:
        return None
    return record["results"]


def record(results, nova_version, path=None):
    path = path or baseline(nova_version)
    path.write_text(json.dumps({"nova": nova_version, "module": MODULE, "results": results},
                               indent=1, sort_keys=True) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, help="stestr workers (default: CPUs)")
    parser.add_argument("--record-baseline", action="store_true",
                        help="run nova's module on nova's class and record it")
    args = parser.parse_args(argv)
    listed = deliberate_differences()
    started = time.monotonic()
    nova_version = importlib.metadata.version("nova")
    nova_results = None if args.record_baseline else recorded(nova_version)
    if nova_results is None:
        nova_results, nova_seconds = run("nova", args.concurrency)
        record(nova_results, nova_version)
        how = f"run now, {nova_seconds:.0f} s; recorded in {baseline(nova_version).name}"
    else:
        how = f"recorded for nova {nova_version} in {baseline(nova_version).name}"
    ours_results, ours_seconds = run("ours", args.concurrency)
    if set(ours_results) != set(nova_results):
        raise SystemExit(f"{baseline(nova_version).name} lists other tests than nova "
                         f"{nova_version}'s "
                         "module runs: run with --record-baseline")
    print(f"nova's module on nova's IronicDriver: {len(nova_results)} tests: "
          f"{_counts(nova_results)} ({how})")
    print(f"nova's module on rp_reporter's IronicDriver: {len(ours_results)} tests: "
          f"{_counts(ours_results)} ({ours_seconds:.0f} s)")
    for test in sorted(t for t, s in nova_results.items() if s != "success"):
        print(f"  (does not pass on nova's own class here: {test}: {nova_results[test]})")
    for test, reason in sorted(listed.items()):
        print(f"  deliberate difference: {test}: {ours_results.get(test)}\n      {reason}")
    problems = compare(nova_results, ours_results, listed)
    for problem in problems:
        print("FAIL:", problem)
    print(f"nova {nova_version}: {'FAILED' if problems else 'conformant'}: "
          f"{len(problems)} problem(s), "
          f"{len(listed)} deliberate difference(s), {time.monotonic() - started:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
