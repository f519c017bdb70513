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

"""tools/bench/nova_scale.py: a periodic's length from nova-compute's own log; and when its
agents (tools/bench/fleet.py) count as settled."""

import datetime

from tools.bench import fleet
from tools.bench import nova_scale

LINE = ('{at} 31139 DEBUG oslo_concurrency.lockutils [None {req} - - - - - -] Lock '
        '"compute_resources" "released" by "nova.compute.resource_tracker.ResourceTracker.'
        '_update_available_resource" :: held {held}s\n')


def test_a_periodic_spans_its_request_ids_lines_and_a_running_one_is_left_out(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text(
        LINE.format(at="2026-11-26 21:09:40.587", req="req-aaaa", held="0.266")
        + "2026-11-26 21:09:41.000 31139 INFO nova.compute.manager [-] something else\n"
        + LINE.format(at="2026-11-26 21:13:56.244", req="req-aaaa", held="0.254")
        + LINE.format(at="2026-11-26 21:15:00.000", req="req-bbbb", held="0.250")
        + LINE.format(at="2026-11-26 21:15:00.500", req="req-bbbb", held="0.250"))
    start = datetime.datetime.fromisoformat("2026-11-26 21:09:40.587").timestamp()
    last = datetime.datetime.fromisoformat("2026-11-26 21:15:00.500").timestamp()
    finished = nova_scale.periodics(log, now=last + nova_scale.RUNNING_WITHIN_S)
    assert [(round(s, 3), n) for _, s, n in finished] == [(255.657, 2), (0.5, 2)]
    assert finished[0][0] == start
    # req-bbbb's last line is too recent to tell it has ended
    assert len(nova_scale.periodics(log, now=last + 1)) == 1


def test_failed_periodics_are_counted_from_novas_own_line(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text("x ERROR oslo_service.periodic_task [-] Error during "
                   "ComputeManager.update_available_resource: MessagingTimeout\n" * 3
                   + "x ERROR oslo_service.periodic_task [-] Error during other_task\n")
    assert nova_scale.failed_periodics(log) == 3


def test_a_boot_is_during_a_periodic_when_they_overlap_and_a_running_one_lasts_till_now(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text(LINE.format(at="2026-11-26 21:00:00.000", req="req-aaaa", held="0.2")
                   + LINE.format(at="2026-11-26 21:00:10.000", req="req-aaaa", held="0.2"))
    at = datetime.datetime.fromisoformat("2026-11-26 21:00:00").timestamp()
    done = at + 60  # long after its last line: that periodic ended at +10 s
    assert nova_scale.during_periodic(log, at - 5, at + 1, now=done)
    assert nova_scale.during_periodic(log, at + 9, at + 30, now=done)
    assert not nova_scale.during_periodic(log, at + 11, at + 30, now=done)
    assert not nova_scale.during_periodic(log, at - 9, at - 1, now=done)
    # read 2 s after its last line, it may still be running: running until now
    assert nova_scale.during_periodic(log, at + 11, at + 12, now=at + 12)


def test_boot_latencies_are_split_by_periodic_and_failures_are_left_out():
    booted = ([{"status": "ACTIVE", "s": float(s), "during": False} for s in range(1, 11)]
              + [{"status": "ACTIVE", "s": 30.0, "during": True},
                 {"status": "ERROR", "s": 99.0, "during": True}])
    figures = nova_scale.latency_figures(booted)
    assert figures["boots"] == 12 and figures["boots_failed"] == 1
    assert figures["boots_idle"] == 10 and figures["boots_during_periodic"] == 1
    assert figures["boot_p50_idle_s"] in (5.0, 6.0)
    assert figures["boot_p99_idle_s"] == 10.0
    assert figures["boot_p50_during_periodic_s"] == figures["boot_p99_during_periodic_s"] == 30.0
    assert nova_scale.latency_figures([])["boot_p50_idle_s"] is None


def test_boot_latencies_are_split_again_within_each_kind_of_boot():
    """Boots built together are slower whether a periodic runs or not: the split by
    periodic is also made among the boots of one kind."""
    booted = ([{"status": "ACTIVE", "s": 5.0, "during": False, "together": False}] * 3
              + [{"status": "ACTIVE", "s": 6.0, "during": True, "together": False}]
              + [{"status": "ACTIVE", "s": 25.0, "during": True, "together": True}] * 2)
    by_kind = nova_scale.latency_figures(booted)["boots_by_kind"]
    assert by_kind["one_by_one"] == {"idle": [3, 5.0, 5.0], "during_periodic": [1, 6.0, 6.0]}
    assert by_kind["together"] == {"idle": [0, None, None],
                                   "during_periodic": [2, 25.0, 25.0]}


def test_runs_sharing_a_request_id_are_told_apart_by_the_tasks_start_line(tmp_path):
    start = ("{at} 6281 DEBUG oslo_service.periodic_task [None req-cccc - - - - - -] Running "
             "periodic task ComputeManager.update_available_resource run_periodic_tasks\n")
    log = tmp_path / "nova-compute.log"
    log.write_text(LINE.format(at="2026-11-26 21:00:00.000", req="req-boot", held="0.2")
                   + start.format(at="2026-11-26 21:01:00.000")
                   + LINE.format(at="2026-11-26 21:01:01.000", req="req-cccc", held="0.2")
                   + LINE.format(at="2026-11-26 21:01:03.000", req="req-cccc", held="0.2")
                   + start.format(at="2026-11-26 21:02:00.000")
                   + LINE.format(at="2026-11-26 21:02:01.000", req="req-cccc", held="0.2"))
    # Each run from its start line (the one at the service's start: its first node).
    assert [(round(last - first, 1), n) for first, last, n in nova_scale.runs(log)] == [
        (0.0, 1), (3.0, 2), (1.0, 1)]


def test_a_run_that_goes_over_no_node_lasts_until_the_drivers_line(tmp_path):
    start = ("{at} 6281 DEBUG oslo_service.periodic_task [None req-dddd - - - - - -] Running "
             "periodic task ComputeManager.update_available_resource run_periodic_tasks\n")
    driver = ("{at} 6281 INFO rp_reporter.nova_compute.periodic [None req-dddd - - - - - -] "
              "resource tracker periodic: {due} of 3 nodes, the others unchanged\n")
    log = tmp_path / "nova-compute.log"
    log.write_text(start.format(at="2026-11-26 21:00:00.000")
                   + driver.format(at="2026-11-26 21:00:01.500", due=0)
                   + start.format(at="2026-11-26 21:01:00.000")
                   + driver.format(at="2026-11-26 21:01:01.000", due=1)
                   + LINE.format(at="2026-11-26 21:01:02.000", req="req-dddd", held="0.2"))
    assert [(round(last - first, 1), n) for first, last, n in nova_scale.runs(log)] == [
        (1.5, 0), (2.0, 1)]


def test_late_renewals_are_read_from_the_drivers_warnings(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text(
        "x WARNING rp_reporter.nova_compute.coordinated_ring [-] membership renewal started "
        "3.5 s late (lease 10 s): nova's work held the process meanwhile\n"
        "x INFO nova.compute.manager [-] membership renewal started elsewhere\n"
        "x WARNING rp_reporter.nova_compute.coordinated_ring [-] membership renewal started "
        "12.0 s late (lease 10 s): nova's work held the process meanwhile\n")
    assert nova_scale.late_renewals(log) == [3.5, 12.0]


def test_a_restarted_services_runs_are_read_from_its_restart_on(tmp_path):
    """A service started again logs on in the same file: its start-up pass is the first
    run after the byte offset the restart began at, not part of the run before."""
    log = tmp_path / "nova-compute.log"
    start = ("{at} 6281 DEBUG oslo_service.periodic_task [None req-dddd - - - - - -] Running "
             "periodic task ComputeManager.update_available_resource run_periodic_tasks\n")
    log.write_text(start.format(at="2026-11-26 21:00:00.000")
                   + LINE.format(at="2026-11-26 21:00:02.000", req="req-dddd", held="0.2"))
    offset = log.stat().st_size
    with log.open("a") as f:
        f.write(LINE.format(at="2026-11-26 21:05:00.000", req="req-eeee", held="0.2")
                + LINE.format(at="2026-11-26 21:05:30.000", req="req-eeee", held="0.2"))
    assert [(round(last - first, 1), n) for first, last, n in nova_scale.runs(log)][-1] != (
        30.0, 2)  # read from the start, the restart's run seems to begin before it
    assert [(round(last - first, 1), n) for first, last, n in
            nova_scale.runs(log, offset)] == [(30.0, 2)]


def test_node_list_requests_of_novas_refresh_are_counted_by_shard_within_the_window(tmp_path):
    line = ('{at} 22250 INFO eventlet.wsgi.server [None req-x u - - all default -] 127.0.0.1 '
            '"GET /v1/nodes?{query} HTTP/1.1" status: 200  len: 338 time: 0.0175257\n')
    nova_fields = "fields=uuid%2Cpower_state%2Ctarget_power_state%2Cprovision_state"
    log = tmp_path / "ironic.log"
    log.write_text(
        line.format(at="2026-11-26 21:00:00.000", query=f"shard=a&{nova_fields}")
        + line.format(at="2026-11-26 21:00:01.000", query=f"shard=a&{nova_fields}"
                      "&sort_key=updated_at&sort_dir=desc&limit=100")
        + line.format(at="2026-11-26 21:00:02.000", query=f"{nova_fields}&shard=b")
        + line.format(at="2026-11-26 21:00:03.000", query="fields=uuid,name&shard=a")  # an agent
        + line.format(at="2026-11-26 21:09:00.000", query=f"shard=a&{nova_fields}")  # later
        # Ironic's own API line (later releases); the listings of what changed
        + "2026-11-26 21:00:04.000 1024 INFO ironic.api [None req-x u - - all default -] "
          "127.0.0.1 - GET /v1/nodes/detail?shard=a&sort_key=created_at&sort_dir=desc"
          "&limit=50 - 200 (49.84ms)\n"
        + "2026-11-26 21:00:05.000 1024 INFO ironic.api [None req-x u - - all default -] "
          "127.0.0.1 - GET /v1/nodes/4c2a1f4e-0b9e-4a53-9d35-1f7c1b1c9a11?fields=uuid - 200 "
          "(9.1ms)\n"  # one node's read
        + line.format(at="2026-11-26 21:00:06.000", query=f"{nova_fields}&instance_uuid=x"))
    at = datetime.datetime.fromisoformat("2026-11-26 21:00:00").timestamp()
    assert nova_scale.node_list_requests(log, at, at + 60) == {"a": 3, "b": 1}


def test_a_quiet_periodic_goes_over_one_node_at_most_and_the_start_is_left_out():
    figures = nova_scale.quiet_figures({"h0": [[300.0, 1000], [4.0, 1], [6.5, 0]],
                                        "h1": [[250.0, 990], [40.0, 990], [3.0, 1]]})
    assert figures == {"quiet_periodic_max_s": 6.5, "busy_periodic_max_s": 40.0}


def test_the_restart_lists_novas_hypervisors_once_a_check():
    """At 10,000 nodes one listing of nova's hypervisors takes about 3 minutes: the check
    whether the restarted service's free nodes are schedulable lists them once, not once
    a node."""
    listings = []

    class Nova:
        def compute_nodes(self):
            listings.append(1)
            return {"a": ["h1"], "b": ["h2"], "c": ["gone"]}

    class Placement:
        def offered(self, resource_class):
            return {"a", "b", "c"}
    live = {"h1", "h2"}
    assert nova_scale.schedulable(Nova(), Placement(), "X", {"a", "b"}, live)
    assert not nova_scale.schedulable(Nova(), Placement(), "X", {"a", "c"}, live)
    assert listings == [1, 1]


STARTED_LINE = ("{at} 31139 DEBUG oslo_service.periodic_task [None req-cccc - - - - - -] "
                "Running periodic task ComputeManager.update_available_resource "
                "run_periodic_tasks\n")


def test_a_restart_is_measured_through_a_boot_nova_errored_that_holds_a_free_node(tmp_path):
    """The restart's figures with fakes for the stack: a boot asked as the service
    starts, set to ERROR by nova's init_host with no node while its queued request
    still takes a free node (seen at 10,000 nodes), is no free node to wait for; the
    start-up pass and the first periodic after it are read from the service's log."""
    log = tmp_path / "nova-compute.log"
    log.write_text("before the restart\n")
    ago = datetime.datetime.now() - datetime.timedelta(seconds=100)

    def at(seconds):
        return (ago + datetime.timedelta(seconds=seconds)).isoformat(" ", "milliseconds")

    class Service:
        def stop(self):
            pass

    class Placement:
        def offered(self, resource_class):
            return {"n2", "n3"}  # n1 is held by a boot below

        def allocations(self, server):
            return {"n1": {"X": 1}} if server == "s0" else {}

        def provider_uuids(self):
            return {"n1", "n2", "n3"}

    class Setup:
        name = "rp_reporter"
        hosts = ["h0", "h1"]
        placement = Placement()
        placement_class = "X"
        resource_class = "x"
        stack = type("Stack", (), {"service": lambda self, name: Service()})()

        def start_service(self, host):
            with open(log, "a") as f:  # its start-up pass (one node), then a periodic
                f.write(LINE.format(at=at(0), req="req-dddd", held="0.1")
                        + STARTED_LINE.format(at=at(10))
                        + "".join(LINE.format(at=at(10 + i), req="req-eeee", held="0.2")
                                  for i in range(3)))

    class Nova:
        booted = []

        def compute_nodes(self):
            return {n: ["h1"] for n in ("n1", "n2", "n3")}

        def boot(self, name, flavor, host):
            self.booted.append(f"s{len(self.booted)}")
            return self.booted[-1]

        def wait_built(self, server, timeout):
            if server in ("s0", "s1"):  # asked as it started: nova's init_host's ERROR
                return {"status": "ERROR"}
            return {"status": "ACTIVE", "OS-EXT-SRV-ATTR:hypervisor_hostname": "n2"}

        def delete(self, server):
            pass

    args = type("Args", (), {"restart_boots": 2, "timeout": 5})()
    figures = nova_scale.after_restart(Setup(), Nova(), "flavor", ["n1", "n2", "n3"],
                                       {"h1": log}, {}, args)
    assert figures["restart_free_nodes"] == 3
    assert figures["restart_first_periodic"] == [0.0, 1]
    assert figures["restart_periodic_after_start"] == [2.0, 3]
    assert figures["restart_boots"] == 4 and figures["restart_boots_failed"] == 2
    assert figures["restart_boot_p50_at_start_s"] is None  # both ERROR
    assert figures["restart_to_schedulable_s"] >= 0
    assert figures["records_deleted_through_restart"] == 0


def agents(count):
    """fleet.Agents without processes: only the metrics ports it would scrape."""
    found = fleet.Agents.__new__(fleet.Agents)
    found.ports = list(range(count))
    return found


def test_agents_are_settled_only_once_each_has_passed_and_none_runs_or_queues():
    two = agents(2)
    assert two.settled({"passed": 2, "running": 0, "queued": 0})
    assert not two.settled({"passed": 1, "running": 0, "queued": 0})  # one has not passed
    assert not two.settled({"passed": 2, "running": 1, "queued": 0})
    assert not two.settled({"passed": 2, "running": 0, "queued": 3})
    assert not two.settled({})  # one not answering
