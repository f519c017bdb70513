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

import threading
import time

from rp_reporter.sync.queue import WorkQueue
from tools.wait import wait_for


def wait_idle(queue, timeout=5):
    wait_for(queue.idle, timeout, "the queue drained", interval=0.01)


def test_a_key_queued_many_times_while_waiting_syncs_once():
    calls = []
    gate = threading.Event()

    def sync(key):
        gate.wait()
        calls.append(key)

    q = WorkQueue(workers=1)
    q.add("blocker")
    q.start(sync)
    time.sleep(0.05)  # the worker is now inside sync("blocker")
    for _ in range(50):
        q.add("a")
    assert q.depth() == 2
    gate.set()
    wait_idle(q)
    q.stop()
    assert calls == ["blocker", "a"]


def _first_sync_blocks():
    """A sync that records its keys; the first one blocks until ``release`` is set."""
    calls = []
    in_sync, release = threading.Event(), threading.Event()

    def sync(key):
        calls.append(key)
        if len(calls) == 1:
            in_sync.set()
            release.wait()
    return sync, calls, in_sync, release


def test_a_key_queued_during_its_own_sync_runs_again():
    sync, calls, in_sync, release = _first_sync_blocks()
    q = WorkQueue(workers=2).start(sync)
    q.add("a")
    in_sync.wait(2)
    q.add("a")  # a newer change arrived while the first sync ran
    release.set()
    wait_idle(q)
    q.stop()
    assert calls == ["a", "a"]


def test_has_a_key_while_it_waits_and_while_it_syncs():
    in_sync, release = threading.Event(), threading.Event()

    def sync(key):
        in_sync.set()
        release.wait()

    q = WorkQueue(workers=1)
    q.add("a")
    assert q.has("a") and not q.has("b")  # waiting
    q.start(sync)
    in_sync.wait(2)
    assert q.has("a")  # running
    release.set()
    wait_idle(q)
    q.stop()
    assert not q.has("a")


def test_failures_retry_with_backoff_until_success():
    attempts = []

    def sync(key):
        attempts.append(time.monotonic())
        if len(attempts) < 3:
            raise RuntimeError("placement down")

    q = WorkQueue(workers=1, backoff_base=0.05).start(sync)
    q.add("a")
    wait_idle(q)
    q.stop()
    assert len(attempts) == 3
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert gaps[0] >= 0.02 and gaps[1] >= 0.04  # jittered in [d/2, d], d doubling


def test_a_failed_key_no_longer_wanted_is_dropped():
    wanted = {"a": True}
    attempts = []

    def sync(key):
        attempts.append(key)
        wanted["a"] = False  # ownership moved away while we failed
        return False

    q = WorkQueue(workers=1, wanted=lambda k: wanted[k], backoff_base=0.01).start(sync)
    q.add("a")
    wait_idle(q)
    q.stop()
    assert attempts == ["a"]


def test_paused_queue_takes_nothing_until_resumed():
    calls = []
    q = WorkQueue(workers=2).start(calls.append)
    q.pause()
    q.add("a")
    time.sleep(0.1)
    assert calls == [] and q.depth() == 1
    q.pause(False)
    wait_idle(q)
    q.stop()
    assert calls == ["a"]


def test_done_callback_reports_each_outcome():
    seen = []
    q = WorkQueue(workers=1, backoff_base=10)
    q.add("good")
    q.add("good")  # coalesced
    q.add("bad")
    q.start(lambda key: key != "bad", on_done=lambda key, ok: seen.append((key, ok)))
    wait_for(lambda: len(seen) == 2, 5, "both outcomes", interval=0.01)
    q.stop()
    assert seen == [("good", True), ("bad", False)]
    assert q.depth() == 1  # the failure waits for its retry


def _order_taken(adds):
    """Keys in the order one worker syncs them, after ``adds`` on a paused queue."""
    calls = []
    q = WorkQueue(workers=1)
    q.pause()
    q.start(calls.append)
    for key, urgent in adds:
        q.add(key, urgent=urgent)
    q.pause(False)
    wait_idle(q)
    q.stop()
    return calls


def test_an_urgent_key_goes_ahead_of_routine_ones():
    assert _order_taken([("a", False), ("b", False), ("n", True), ("c", False),
                         ("m", True)]) == ["n", "m", "a", "b", "c"]


def test_a_routine_key_made_urgent_moves_up_and_syncs_once():
    assert _order_taken([("a", False), ("b", False), ("c", False), ("b", True),
                         ("b", False), ("b", True)]) == ["b", "a", "c"]


def test_an_urgent_key_queued_during_its_own_sync_runs_next():
    sync, calls, in_sync, release = _first_sync_blocks()
    q = WorkQueue(workers=1).start(sync)
    q.add("a", urgent=True)
    in_sync.wait(2)
    for key in ("x", "y"):
        q.add(key)
    q.add("a", urgent=True)  # changed again while its first sync ran
    release.set()
    wait_idle(q)
    q.stop()
    assert calls == ["a", "a", "x", "y"]


def test_a_sync_that_fails_thousands_of_times_then_succeeds_is_synced():
    # 2 ** 1024 overflows a float: an uncapped exponent killed the worker at
    # the 1,025th failure and left the key marked queued for good.
    failures_wanted = 3000
    attempts = []

    def sync(key):
        attempts.append(key)
        return len(attempts) > failures_wanted

    q = WorkQueue(workers=1, backoff_base=1e-7, backoff_max=1e-5).start(sync)
    q.add("a")
    wait_idle(q, timeout=60)
    assert len(attempts) == failures_wanted + 1
    assert all(t.is_alive() for t in q._threads)
    q.add("a")  # the key is free again: a later event syncs it
    wait_idle(q)
    q.stop()
    assert len(attempts) == failures_wanted + 2


def test_the_backoff_doubles_and_stays_at_its_cap_for_any_number_of_failures():
    from rp_reporter.sync.queue import backoff

    assert [backoff(n, 0.2, 30.0) for n in (1, 2, 3)] == [0.2, 0.4, 0.8]
    assert backoff(1025, 0.2, 30.0) == 30.0
    assert backoff(10 ** 9, 0.2, 30.0) == 30.0


def test_a_callback_that_raises_costs_nothing_but_its_own_call():
    synced = []

    def on_done(key, ok):
        raise RuntimeError("metrics bug")

    q = WorkQueue(workers=1).start(synced.append, on_done=on_done)
    for key in ("a", "b", "c"):
        q.add(key)
    wait_idle(q)
    assert synced == ["a", "b", "c"] and q._threads[0].is_alive()
    q.stop()


def test_a_worker_that_dies_is_started_again_and_its_key_synced():
    calls = []

    def sync(key):
        calls.append(key)
        if len(calls) == 1:
            raise SystemExit("thread killed")  # not an Exception: ends the thread

    q = WorkQueue(workers=1, backoff_max=0.05).start(sync)
    q.add("a")
    wait_for(lambda: not q._threads[0].is_alive(), 5, "the worker's end", interval=0.01)
    assert q.has("a")  # released for a retry, not lost
    revived = q.revive()
    assert revived == [("sync-0", "SystemExit: thread killed")]
    wait_idle(q)
    q.stop()
    assert calls == ["a", "a"]
    assert q.revive() == []  # stopped: nothing to start
