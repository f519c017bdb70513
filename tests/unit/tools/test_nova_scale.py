"""tools/bench/nova_scale.py: a periodic's length from nova-compute's own log."""

from tools.bench import nova_scale

LINE = ('{at} 31139 DEBUG oslo_concurrency.lockutils [None {req} - - - - - -] Lock '
        '"compute_resources" "released" by "nova.compute.resource_tracker.ResourceTracker.'
        '_update_available_resource" :: held {held}s\n')


def test_a_periodic_spans_its_request_ids_lines_and_partial_ones_are_left_out(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text(
        LINE.format(at="2026-11-26 21:09:40.587", req="req-aaaa", held="0.266")
        + "2026-11-26 21:09:41.000 31139 INFO nova.compute.manager [-] something else\n"
        + LINE.format(at="2026-11-26 21:13:56.244", req="req-aaaa", held="0.254")
        + LINE.format(at="2026-11-26 21:15:00.000", req="req-bbbb", held="0.250"))
    assert nova_scale.periodics(log, nodes=2) == [255.657]  # req-bbbb has 1 of 2 nodes
    assert nova_scale.periodics(log, nodes=1) == [255.657, 0.0]


def test_failed_periodics_are_counted_from_novas_own_line(tmp_path):
    log = tmp_path / "nova-compute.log"
    log.write_text("x ERROR oslo_service.periodic_task [-] Error during "
                   "ComputeManager.update_available_resource: MessagingTimeout\n" * 3
                   + "x ERROR oslo_service.periodic_task [-] Error during other_task\n")
    assert nova_scale.failed_periodics(log) == 3
