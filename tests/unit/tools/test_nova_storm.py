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

"""tools/bench/nova_storm.py: Placement's 409s from its request log, and a service's
settings changed in its configuration file."""

import configparser

from tools.bench import nova_storm
from tools.localstack import process

REQUEST = ('2026-12-05 17:18:11.598 819 INFO placement.requestlog [req-1 req-2 u p - - default '
           'default] 127.0.0.1 "{method} {path}" status: {status} len: 428 microversion: 1.36\n')


def test_409s_are_counted_from_the_offset_by_what_was_written(tmp_path):
    log = tmp_path / "placement.log"
    before = REQUEST.format(method="PUT", path="/allocations/a", status=409)
    log.write_text(
        before
        + REQUEST.format(method="PUT", path="/allocations/b", status=409)
        + REQUEST.format(method="PUT", path="/allocations/c", status=204)
        + REQUEST.format(method="PUT", path="/resource_providers/r/inventories", status=409)
        + REQUEST.format(method="PUT", path="/resource_providers/r/traits", status=409)
        + "2026-12-05 17:18:12.651 818 WARNING placement.objects.resource_provider [-] "
          "Resource provider r is now over-capacity\n")
    assert nova_storm.placement_409s(log, len(before)) == {
        "allocations": 1, "inventories": 1, "other": 1}
    assert nova_storm.placement_409s(log, 0)["allocations"] == 2


def test_settings_are_set_and_none_gives_the_option_back_to_its_default(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text("[DEFAULT]\ndebug = False\n[placement]\nallocation_conflict_retry_count = 1\n")
    process.update_ini(conf, {"placement": {"randomize_allocation_candidates": "True"},
                              "scheduler": {"workers": 2}})
    process.update_ini(conf, {"scheduler": {"workers": None, "max_placement_results": None}})
    parser = configparser.ConfigParser()
    parser.read(conf)
    assert dict(parser["placement"]) == {"debug": "False",  # DEFAULT shows in every section
                                         "allocation_conflict_retry_count": "1",
                                         "randomize_allocation_candidates": "True"}
    assert not parser.has_option("scheduler", "workers")


def test_an_unreadable_answer_counts_once_whatever_its_traceback(tmp_path):
    log = tmp_path / "nova-scheduler.log"
    head = "2026-12-05 17:27:33.334 3492 "
    log.write_text(
        head + "WARNING nova.scheduler.client.report [None req-1 u p - - default default] "
               "Placement API service is not responding.: ConnectFailure: LineTooLong\n"
        + head + "ERROR oslo_messaging.rpc.server [None req-2 u p - - default default] "
                 "Exception during message handling: requests.exceptions.JSONDecodeError: "
                 "Extra data\n"
        + head + "ERROR oslo_messaging.rpc.server Traceback (most recent call last):\n"
        + head + "ERROR oslo_messaging.rpc.server json.decoder.JSONDecodeError: Extra data\n"
        + head + "WARNING nova.scheduler.client.report [None req-3 u p - - default default] "
                 "Failed to save allocation for a. Got HTTP 409\n")
    assert nova_storm.unreadable_answers(log, 0) == 2


def test_a_builds_seconds_are_novas_own_from_create_to_launch():
    record = {"created": "2026-12-06T21:04:42Z",
              "OS-SRV-USG:launched_at": "2026-12-06T21:05:17.000000"}
    took, at = nova_storm.launched(record)
    assert took == 35.0
    assert at - nova_storm._utc("2026-12-06T21:04:42Z").timestamp() == 35.0
    assert nova_storm.launched({"created": "2026-12-06T21:04:42Z",
                                "OS-SRV-USG:launched_at": None}) is None


def test_cpu_a_build_is_by_service_with_the_computes_as_one():
    used = {"nova-compute-rp-reporter-1000-0": 3.0, "nova-compute-rp-reporter-1000-1": 1.0,
            "placement": 5.0, "nova-scheduler": 10.0, "etcd": 0.1}
    assert nova_storm.by_service(used, 20) == {
        "etcd": 0.01, "nova-compute": 0.2, "nova-scheduler": 0.5, "placement": 0.25}
    assert nova_storm.by_service(used, 0) == {}


def _run(p50, p99, active, cpu, reasons=None):
    return {"storm": 100, "when": "quiet", "moment_found": True, "p50_s": p50, "p99_s": p99,
            "max_s": p99, "scheduler_cpu_s": 1.0, "placement_cpu_s": 2.0, "active": active,
            "error": 100 - active, "reschedules": 1, "placement_409": 3,
            "scheduler_unreadable_answers": 0, "during_periodic": 2, "cpu_per_build_s": cpu,
            "error_reasons": reasons or {}, "unfinished": [], "refused": [],
            "placement_409_by_write": {"allocations": 3}, "load": 2.0}


def test_a_row_is_the_median_of_its_runs_with_the_p99s_spread_and_summed_counts():
    row = nova_storm.combined([
        _run(10.0, 70.0, 100, {"placement": 0.5, "agents": 0.1}),
        _run(12.0, 75.7, 99, {"placement": 0.7}, {"No valid host": 1}),
        _run(11.0, 71.4, 100, {"placement": 0.6, "agents": 0.3})])
    assert (row["runs"], row["p50_s"], row["p99_s"]) == (3, 11.0, 71.4)
    assert row["p99_spread_s"] == 5.7 and row["p99_runs_s"] == [70.0, 75.7, 71.4]
    assert (row["active"], row["error"], row["reschedules"]) == (299, 1, 3)
    # a service absent from a run used nothing there
    assert row["cpu_per_build_s"] == {"agents": 0.1, "placement": 0.6}
    assert row["error_reasons"] == {"No valid host": 1}
    assert row["placement_409_by_write"] == {"allocations": 9}


def test_a_connection_held_by_the_schedulers_parent_and_its_workers_is_shared():
    lines = [
        '0 0 127.0.0.1:40100 127.0.0.1:8778 users:(("nova-scheduler",pid=10,fd=9),'
        '("nova-scheduler",pid=12,fd=9),("nova-scheduler",pid=11,fd=9))',
        '0 0 127.0.0.1:40102 127.0.0.1:8778 users:(("nova-scheduler",pid=12,fd=14))',
        '0 0 127.0.0.1:40104 127.0.0.1:5672 users:(("nova-scheduler",pid=10,fd=5),'
        '("nova-scheduler",pid=11,fd=5))']
    assert nova_storm.shared_connections(lines, 8778) == [("127.0.0.1:40100", [10, 11, 12])]
    assert nova_storm.shared_connections(lines[1:], 8778) == []
