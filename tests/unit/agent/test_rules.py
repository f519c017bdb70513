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

"""The agent's trait rules ([traits] rules_file, agent/rules.py): loaded at start, where
a bad file is refused in one line, and reloaded, where a bad file keeps the rules in
force.  NodeTraits is faked as in tests/unit/sync/test_node.py."""

import logging

import pytest

from rp_reporter import agent as rp_agent
from rp_reporter import conf as rp_conf
from tests.unit.sync.test_node import FakeNodeTraits


@pytest.fixture
def agent(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n")
    return rp_agent.Agent(rp_conf.load(["--config-file", str(path)]))


def test_a_bad_rule_file_on_reload_keeps_the_rules_in_force(agent, tmp_path, caplog,
                                                           monkeypatch):
    from rp_reporter import traits
    good = tmp_path / "rules.yaml"
    agent.node_sync.node_traits = kept = FakeNodeTraits()
    agent.conf.set_override("rules_file", str(good), group="traits")

    def refuse(path):
        raise traits.RulesError(str(path), "line 1", "not a mapping")
    monkeypatch.setattr(traits, "load_rules", refuse)
    with caplog.at_level(logging.ERROR, logger="rp_reporter.agent"):
        assert agent.reload_rules() is False
    assert agent.node_sync.node_traits is kept
    assert [r.getMessage() for r in caplog.records] == [
        f"trait rules not reloaded, the rules in force are kept: [traits] rules_file: "
        f"{good}: line 1: not a mapping"]


def test_rules_reload_and_bad_rules_at_start(agent, tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("capabilities: [boot_mode]\n")
    agent.conf.set_override("rules_file", str(path), group="traits")
    assert agent.reload_rules() is True
    assert agent.node_sync.node_traits.rules.capabilities[0].key == "boot_mode"
    assert agent.resync_now.is_set()  # a resync puts every node in step with the new rules
    path.write_text("capabilities: {boot_mode: {colour: red}}\n")
    with pytest.raises(ValueError) as e:
        rp_agent.load_rules(agent.conf)
    assert str(e.value).startswith(f"[traits] rules_file: {path}: capabilities.boot_mode: ")
    assert "\n" not in str(e.value)
    agent.conf.clear_override("rules_file", group="traits")
    assert rp_agent.load_rules(agent.conf) is None
