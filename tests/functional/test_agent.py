"""rp-reporter-agent as a process: reconciles on its interval, stops cleanly."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.functional


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s")


@pytest.fixture
def agent(stack, ironic, tmp_path):
    conf = tmp_path / "agent.conf"
    conf.write_text(stack.reporter_conf(ironic={"shard": ironic.shard},
                                        reconcile={"interval": 1}))
    log = open(tmp_path / "agent.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                             str(conf)], stdout=log, stderr=subprocess.STDOUT)
    yield proc, log
    if proc.poll() is None:
        proc.kill()
    log.close()


def test_agent_reconciles_on_its_interval_and_stops_on_sigterm(agent, ironic, placement):
    proc, log = agent
    node = ironic.create()
    wait_for(lambda: placement.provider(node) is not None, 20, "provider created")
    ironic.set_maintenance(node, True)
    wait_for(lambda: placement.provider(node)["inventories"] == {
        "CUSTOM_BAREMETAL_GOLD": (1, 1, 1)}, 20, "maintenance reached Placement")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert time.monotonic() - started < 10
    log.seek(0)
    output = log.read()
    assert "stopped" in output and "Traceback" not in output


def test_agent_refuses_bad_configuration(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("[placement]\nauth_type = none\n")
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                           str(conf)], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))
    assert proc.returncode == 2
    assert proc.stderr.startswith("rp-reporter-agent: error: bad configuration:")
