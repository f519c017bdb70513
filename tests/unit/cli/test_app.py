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

"""rp_reporter.cli.app: what the commands share (here, which capability rules they read)."""

import types

import pytest

from rp_reporter import traits
from rp_reporter.cli import app


def conf(rules_file):
    return types.SimpleNamespace(traits=types.SimpleNamespace(rules_file=rules_file))


def test_rules_from_the_option_else_the_configuration_else_the_defaults(tmp_path):
    option, configured = tmp_path / "option.yaml", tmp_path / "conf.yaml"
    option.write_text("capabilities: [profile]\n")
    configured.write_text("capabilities: [raid_level]\n")
    assert app.resolve_rules(str(option), conf(str(configured))).source == str(option)
    assert app.resolve_rules(None, conf(str(configured))).source == str(configured)
    assert app.resolve_rules(None, conf(None)) is traits.DEFAULT_RULES
    assert app.resolve_rules(None) is traits.DEFAULT_RULES


def test_a_bad_rule_file_is_a_usage_error_in_one_line(tmp_path):
    with pytest.raises(app.UsageError) as e:
        app.resolve_rules(str(tmp_path / "missing.yaml"))
    assert str(e.value).startswith("bad rule file: ") and "\n" not in str(e.value)
