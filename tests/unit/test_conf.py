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

import logging
import os

import pytest
from oslo_config import generator

from rp_reporter import conf as rp_conf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "etc", "rp_reporter", "rp_reporter.conf.sample")


def test_sample_config_is_current(tmp_path):
    """Fails when an option changed and `tox -e genconfig` was not run."""
    out = tmp_path / "sample.conf"
    generator.main(["--config-file",
                    os.path.join(ROOT, "etc", "rp_reporter", "rp_reporter-config-generator.conf"),
                    "--output-file", str(out)])
    with open(SAMPLE) as committed:
        assert out.read_text() == committed.read(), "run: tox -e genconfig"


def test_local_stack_style_config_loads(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:6385\n"
                    "[placement]\nauth_type = admin_token\nendpoint = http://127.0.0.1:8778\n"
                    "token = admin\n")
    conf = rp_conf.load(["--config-file", str(path)])
    assert rp_conf.adapter(conf, "placement").get_endpoint() == "http://127.0.0.1:8778"
    assert rp_conf.adapter(conf, "ironic").get_endpoint() == "http://127.0.0.1:6385"
    assert conf.placement.service_type == "placement" and conf.ironic.service_type == "baremetal"


def test_each_service_keeps_a_connection_per_concurrent_caller(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text("[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:6385\n"
                    "[agent]\nworkers = 16\n[reconcile]\nworkers = 12\n")
    conf = rp_conf.load(["--config-file", str(path)])
    transport = rp_conf.adapter(conf, "ironic").session.session.get_adapter("http://127.0.0.1")
    assert transport._pool_maxsize == 28  # requests' own default is 10


def test_every_option_group_is_in_the_sample():
    groups = {group for group, _ in rp_conf.list_opts()}
    assert groups == {"DEFAULT", "ironic", "placement", "reconcile", "notifications", "agent",
                      "coordination", "ring", "traits", "tenancy", "nova"}


# Every option renamed so far: (group, old name, new group, new name). The old name keeps
# working, with a warning, for at least one release after the rename.
RENAMED = [("agent", "retry_max", "agent", "retry_backoff_max")]


@pytest.mark.parametrize(("old_group", "old_name", "group", "name"), RENAMED)
def test_a_renamed_option_still_works_under_its_old_name(tmp_path, caplog, old_group,
                                                         old_name, group, name):
    path = tmp_path / "rp.conf"
    path.write_text(f"[{old_group}]\n{old_name} = 7\n")
    with caplog.at_level(logging.WARNING, logger="oslo_config.cfg"):
        conf = rp_conf.load(["--config-file", str(path)])
        assert getattr(conf[group], name) == 7
    assert any(f'"{old_name}" from group "{old_group}" is deprecated' in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize(("old_group", "old_name", "group", "name"), RENAMED)
def test_the_new_name_wins_over_the_old(tmp_path, old_group, old_name, group, name):
    path = tmp_path / "rp.conf"
    path.write_text(f"[{old_group}]\n{old_name} = 7\n[{group}]\n{name} = 9\n")
    conf = rp_conf.load(["--config-file", str(path)])
    assert getattr(conf[group], name) == 9
