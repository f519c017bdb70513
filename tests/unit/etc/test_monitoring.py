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

"""The monitoring that ships beside the agent: Prometheus rules (promtool check and
its unit tests), the Grafana dashboard and the systemd units.  Every metric a rule,
an annotation or a dashboard query names is one the agent exports.

promtool and systemd-analyze are run where present; `tox -e monitoring` installs
promtool and sets RP_MONITORING=1, which turns a missing tool into a failure.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from rp_reporter import metrics as rp_metrics

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
RULES = os.path.join(ROOT, "etc", "prometheus", "rp_reporter.rules.yml")
RULE_TESTS = os.path.join(ROOT, "etc", "prometheus", "tests", "rp_reporter.test.yml")
DASHBOARD = os.path.join(ROOT, "etc", "grafana", "rp_reporter.json")
UNITS = os.path.join(ROOT, "etc", "systemd")
REQUIRED = os.environ.get("RP_MONITORING") == "1"

NAME = re.compile(r"\b(rp_reporter(?:_|:)[a-z0-9_:]*[a-z0-9])")
SUFFIXES = {"counter": ("_total", "_created"), "gauge": ("",),
            "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created")}


def exported():
    """Every series name the agent's /metrics can show."""
    names = set()
    for family in rp_metrics.Metrics().registry.collect():
        names.update(family.name + s for s in SUFFIXES[family.type])
    return names


def _rules():
    with open(RULES) as f:
        return [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]


def _names(text):
    return set(NAME.findall(text))


def _recorded():
    return {r["record"] for r in _rules() if "record" in r}


def test_the_agent_exports_what_the_rules_expect():
    assert {"rp_reporter_deletions_refused_total", "rp_reporter_providers_absent",
            "rp_reporter_event_to_write_seconds_bucket", "rp_reporter_fenced",
            "rp_reporter_healthy", "rp_reporter_dependency_up"} <= exported()


def test_every_metric_a_rule_names_is_exported_or_recorded():
    known = exported() | _recorded()
    for rule in _rules():
        text = rule["expr"] + " ".join(rule.get("annotations", {}).values())
        unknown = _names(text) - known
        assert not unknown, f"{rule.get('alert') or rule.get('record')}: {sorted(unknown)}"
        # Beside ours, only Prometheus' own `up`.
        others = set(re.findall(r"\b([a-z_]+)\{", rule["expr"])) - known
        assert others <= {"up"}, others


def test_recording_rules_follow_the_naming_convention():
    for name in _recorded():
        level, metric, _ops = name.split(":")
        assert level == "rp_reporter" and metric and _ops


def test_every_alert_says_what_and_how_bad():
    alerts = [r for r in _rules() if "alert" in r]
    assert {"RPReporterAgentDown", "RPReporterAgentFenced", "RPReporterQueueNotDraining",
            "RPReporterDriftPersisting", "RPReporterSyncFailures",
            "RPReporterDeletionRefused", "RPReporterNotificationsSilent",
            "RPReporterReconcileNotFinishing"} <= {r["alert"] for r in alerts}
    for rule in alerts:
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_every_alert_has_a_promtool_test():
    with open(RULE_TESTS) as f:
        tested = {t["alertname"] for case in yaml.safe_load(f)["tests"]
                  for t in case.get("alert_rule_test", [])}
    untested = {r["alert"] for r in _rules() if "alert" in r} - tested
    # Two single-comparison alerts are left to promtool check.
    assert untested <= {"RPReporterReconcileSlow", "RPReporterNodesSkipped"}, untested


def _dashboard_exprs():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"]
              if isinstance(v.get("query"), dict)]
    return dashboard, exprs


def test_every_dashboard_query_names_an_exported_metric():
    dashboard, exprs = _dashboard_exprs()
    known = exported()
    used = set()
    for expr in exprs:
        names = _names(expr)
        assert names or "up{" in expr, expr
        assert names <= known, f"{expr}: {sorted(names - known)}"
        used |= names
    # What the issue asks the dashboard to show.
    assert {"rp_reporter_nodes_owned", "rp_reporter_queue_depth",
            "rp_reporter_event_to_write_seconds_bucket", "rp_reporter_placement_writes_total",
            "rp_reporter_last_reconcile_drift", "rp_reporter_sync_failures_total",
            "rp_reporter_deletions_refused_total"} <= used
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def _tool(name):
    path = shutil.which(name)
    if path is None:
        if REQUIRED:
            pytest.fail(f"{name} is missing (tox -e monitoring installs it: "
                        f"tools/install_monitoring_tools.sh)")
        pytest.skip(f"{name} not installed")
    return path


def test_promtool_check_rules():
    result = subprocess.run([_tool("promtool"), "check", "rules", RULES], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules():
    result = subprocess.run([_tool("promtool"), "test", "rules", RULE_TESTS],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_systemd_units_verify(tmp_path):
    tool = _tool("systemd-analyze")
    units = sorted(os.listdir(UNITS))
    assert {"rp-reporter-agent.service", "rp-reporter-reconcile.service",
            "rp-reporter-reconcile.timer"} <= set(units)
    for unit in units:  # verify wants the executables to exist: any will do
        with open(os.path.join(UNITS, unit)) as f:
            text = f.read()
        (tmp_path / unit).write_text(re.sub(r"/usr/bin/rp-reporter(-agent)?", sys.executable,
                                            text))
    result = subprocess.run([tool, "verify", *[str(tmp_path / u) for u in units]],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


def test_agent_unit_waits_for_readiness():
    with open(os.path.join(UNITS, "rp-reporter-agent.service")) as f:
        text = f.read()
    for line in ("Type=notify", "Restart=on-failure", "RestartPreventExitStatus=2",
                 "ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes",
                 "ProtectSystem=strict", "StateDirectory=rp_reporter"):
        assert f"\n{line}\n" in text, line
