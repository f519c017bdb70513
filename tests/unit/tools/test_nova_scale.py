"""tools/bench/nova_scale.py: a periodic's length from nova-compute's own log."""

import datetime

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
