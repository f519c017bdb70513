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

"""Logging (oslo.log) and systemd readiness: options, the sample, the journal's
native protocol, and the agent as a real process (log file reopened on SIGHUP,
JSON lines, READY=1 on $NOTIFY_SOCKET).  The agent needs no service for these:
it starts and serves /healthz whatever Ironic and Placement say."""

import json
import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from rp_reporter import conf as rp_conf
from rp_reporter import log as rp_log
from tests.unit.test_conf import SAMPLE
from tools.wait import wait_for

LOGGING_OPTIONS = ("debug", "log_file", "log_dir", "use_json", "use_journal", "use_syslog",
                   "use_stderr", "syslog_log_facility", "log_config_append", "log_date_format",
                   "logging_context_format_string", "logging_default_format_string",
                   "default_log_levels", "log_rotation_type")


def test_every_logging_option_is_in_the_sample():
    with open(SAMPLE) as f:
        sample = f.read()
    for name in LOGGING_OPTIONS:
        assert f"\n#{name} = " in sample, name


def test_logging_options_load_from_a_file(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[DEFAULT]\nlog_file = /tmp/x.log\nuse_json = true\ndebug = true\n")
    conf = rp_conf.load(["--config-file", str(path)])
    assert conf.log_file == "/tmp/x.log" and conf.use_json and conf.debug
    assert "oslo_messaging=WARN" in conf.default_log_levels
    assert "keystoneauth=WARN" in conf.default_log_levels  # oslo.log's own defaults kept


def _datagram_socket(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(60)
    return sock


def _journal_fields(data):
    """Parse journald's native protocol (both field forms)."""
    fields = {}
    while data:
        line, sep, rest = data.partition(b"\n")
        if b"=" in line:
            key, _, value = line.partition(b"=")
            fields[key.decode()], data = value.decode(), rest
        else:
            (size,) = struct.unpack("<Q", rest[:8])
            fields[line.decode()] = rest[8:8 + size].decode()
            data = rest[8 + size + 1:]
    return fields


def test_native_journal_speaks_journald_protocol(tmp_path):
    sock = _datagram_socket(tmp_path / "journal")
    journal = rp_log._NativeJournal()
    journal.socket_path = str(tmp_path / "journal")
    journal.send("two\nlines", PRIORITY=3, LOGGER_NAME="rp_reporter.agent", SKIPPED=None)
    fields = _journal_fields(sock.recv(65536))
    assert fields == {"MESSAGE": "two\nlines", "PRIORITY": "3",
                      "LOGGER_NAME": "rp_reporter.agent"}


def test_use_journal_works_without_the_systemd_bindings(tmp_path, monkeypatch):
    sock = _datagram_socket(tmp_path / "journal")
    monkeypatch.setattr(rp_log._NativeJournal, "socket_path", str(tmp_path / "journal"))
    path = tmp_path / "rp.conf"
    path.write_text("[DEFAULT]\nuse_journal = true\n")
    conf = rp_conf.load(["--config-file", str(path)])
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        rp_log.setup(conf)
        logging.getLogger("rp_reporter.test").warning("to the journal")
        fields = _journal_fields(sock.recv(65536))
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
    assert "to the journal" in fields["MESSAGE"]
    assert fields["PRIORITY"] == "4" and fields["LOGGER_NAME"] == "rp_reporter.test"


def test_cli_keeps_its_console_and_adds_the_file(tmp_path):
    path = tmp_path / "rp.conf"
    log_file = tmp_path / "cli.log"
    path.write_text(f"[DEFAULT]\nlog_file = {log_file}\n")
    conf = rp_conf.load(["--config-file", str(path)])
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    console = logging.StreamHandler(sys.stderr)  # as cliff configures the CLI's logging
    console.setLevel(logging.WARNING)
    root.addHandler(console)
    root.setLevel(logging.DEBUG)
    try:
        rp_log.setup_cli(conf)
        assert console in root.handlers
        assert not any(type(h) is logging.StreamHandler and h.stream is sys.stdout
                       for h in root.handlers)
        logging.getLogger("rp_reporter.test").info("into the file")
        logging.getLogger("rp_reporter.test").debug("not without [DEFAULT] debug")
    finally:
        for h in list(root.handlers):
            root.removeHandler(h)
            if h is not console and h not in saved[0]:
                h.close()
        for h in saved[0]:
            root.addHandler(h)
        root.setLevel(saved[1])
    assert "into the file" in log_file.read_text()
    assert "without [DEFAULT] debug" not in log_file.read_text()


def test_nothing_configured_leaves_the_cli_alone(tmp_path):
    conf = rp_conf.load([])
    root = logging.getLogger()
    before = list(root.handlers)
    rp_log.setup_cli(conf)
    assert root.handlers == before


def test_sd_notify(tmp_path):
    assert rp_log.sd_notify("READY=1", environ={}) is False
    sock = _datagram_socket(tmp_path / "notify")
    assert rp_log.sd_notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "notify")})
    assert sock.recv(1024) == b"READY=1"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    abstract.bind(f"\0rp-reporter-test-{os.getpid()}")
    assert rp_log.sd_notify("STOPPING=1",
                            environ={"NOTIFY_SOCKET": f"@rp-reporter-test-{os.getpid()}"})
    assert abstract.recv(1024) == b"STOPPING=1"
    # No listener: advice lost, never an exception.
    assert rp_log.sd_notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "x")}) is False


# -- the agent as a real process ------------------------------------------------
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def agent(tmp_path):
    """Start rp-reporter-agent with [DEFAULT] options; Ironic and Placement point at a
    closed port (the agent runs, and says they are down)."""
    procs = []

    def start(env=None, **default):
        port = _free_port()
        dead = f"http://127.0.0.1:{_free_port()}"
        conf = tmp_path / "agent.conf"
        conf.write_text(
            "[DEFAULT]\nhost = logtest\n" + "".join(f"{k} = {v}\n" for k, v in default.items())
            + f"[agent]\nmetrics_bind = 127.0.0.1:{port}\nretry_backoff_max = 1\n"
            f"[ironic]\nauth_type = none\nendpoint_override = {dead}\n"
            f"[placement]\nauth_type = admin_token\nendpoint = {dead}\ntoken = admin\n"
            "request_attempts = 1\n")
        out = open(tmp_path / "stdout", "ab")
        err = open(tmp_path / "stderr", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                                 str(conf)], stdout=out, stderr=err,
                                env=dict(os.environ, **(env or {})))
        procs.append(proc)
        proc.port = port
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _answers(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def _metrics(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return r.read().decode()
    except OSError:
        return ""


def test_agent_logs_to_its_file_and_sighup_reopens_it(agent, tmp_path):
    log_file = tmp_path / "agent.log"
    proc = agent(log_file=log_file)
    wait_for(lambda: log_file.exists() and "agent logtest starting" in log_file.read_text(), 60,
             "the agent's first lines in log_file", interval=0.1)
    wait_for(lambda: _answers(proc.port), 60, "/healthz", interval=0.1)
    # What /healthz says, as the gauges the alerts use (Ironic is a closed port here).
    wait_for(lambda: 'rp_reporter_dependency_up{dependency="ironic"} 0.0' in _metrics(proc.port),
             60, "Ironic down in the metrics", interval=0.1)
    metrics = _metrics(proc.port)
    assert "\nrp_reporter_healthy 0.0\n" in metrics and "\nrp_reporter_fenced 0.0\n" in metrics
    moved = tmp_path / "agent.log.1"
    os.rename(log_file, moved)  # what logrotate does
    proc.send_signal(signal.SIGHUP)
    wait_for(lambda: log_file.exists() and "log reopened" in log_file.read_text(), 30,
             "a new log file after SIGHUP", interval=0.1)
    assert "log reopened" not in moved.read_text()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert "agent logtest stopped" in log_file.read_text()
    # With a log file, nothing on the console.
    assert (tmp_path / "stdout").read_bytes() == b"" == (tmp_path / "stderr").read_bytes()


def test_agent_logs_json_and_tells_systemd_it_is_ready(agent, tmp_path):
    notify = _datagram_socket(tmp_path / "notify")
    proc = agent(env={"NOTIFY_SOCKET": str(tmp_path / "notify")}, use_json="true")
    ready = notify.recv(4096).decode()
    assert ready.startswith("READY=1\n") and f"MAINPID={proc.pid}" in ready
    assert _answers(proc.port)  # /healthz served before READY=1
    proc.send_signal(signal.SIGTERM)
    assert notify.recv(4096) == b"STOPPING=1"
    assert proc.wait(30) == 0
    # No destination configured: stderr, as the agent always logged (the journal under systemd).
    assert (tmp_path / "stdout").read_bytes() == b""
    lines = [json.loads(line) for line in (tmp_path / "stderr").read_text().splitlines()
             if line.strip()]
    messages = [r["message"] for r in lines]
    assert "agent logtest starting" in messages and "agent logtest stopped" in messages
    assert all({"levelname", "name", "asctime"} <= set(r) for r in lines)


def test_agent_refuses_an_unwritable_log_file_in_one_line(tmp_path):
    conf = tmp_path / "agent.conf"
    conf.write_text(f"[DEFAULT]\nlog_file = {tmp_path}/missing/dir/agent.log\n"
                    "[agent]\nmetrics_bind =\n[ironic]\nauth_type = none\n"
                    "endpoint_override = http://127.0.0.1:9\n[placement]\nauth_type = none\n"
                    "endpoint_override = http://127.0.0.1:9\n")
    result = subprocess.run([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                             str(conf)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stderr.startswith("rp-reporter-agent: error: bad logging configuration")
    assert len(result.stderr.splitlines()) == 1


def test_cli_with_a_log_file_keeps_one_line_errors(tmp_path):
    log_file = tmp_path / "cli.log"
    conf = tmp_path / "cli.conf"
    conf.write_text(f"[DEFAULT]\nlog_file = {log_file}\ndebug = true\n"
                    "[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n")
    result = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file", str(conf),
                             "status", "-f", "json"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("rp-reporter: error: [ironic] unreachable")
    assert len(result.stderr.splitlines()) == 1
    assert log_file.exists()
