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
import re
import ssl
import sys

import pytest
from oslo_config import generator

from rp_reporter import conf as rp_conf
from rp_reporter import preflight

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(ROOT, "etc", "rp_reporter", "rp_reporter.conf.sample")


@pytest.mark.skipif(sys.version_info < (3, 10), reason=(
    "oslo-config-generator's main() reads its own version with 3.9's importlib.metadata, "
    "which misses a wheel's normalized name (oslo_config-*.dist-info); the sample is the "
    "same on every Python"))
@pytest.mark.parametrize("generator_conf,sample", [
    ("rp_reporter-config-generator.conf", "rp_reporter.conf.sample"),
    # the driver's [rp_reporter] section of nova.conf, made where nova is not installed
    ("nova-config-generator.conf", "nova.conf.rp_reporter.sample")])
def test_sample_config_is_current(tmp_path, generator_conf, sample):
    """Fails when an option changed and `tox -e genconfig` was not run."""
    out = tmp_path / "sample.conf"
    generator.main(["--config-file", os.path.join(ROOT, "etc", "rp_reporter", generator_conf),
                    "--output-file", str(out)])
    with open(os.path.join(ROOT, "etc", "rp_reporter", sample)) as committed:
        assert out.read_text() == committed.read(), "run: tox -e genconfig"
    # Each option once in its section: oslo.log's come from its own namespace, with our
    # defaults set by the oslo.config.opts.defaults hook, not copied beside it.
    section, seen = None, set()
    for line in out.read_text().splitlines():
        if line.startswith("["):
            section = line
        elif re.match(r"^#\w+ = ", line):
            key = (section, line.split(" = ")[0])
            assert key not in seen, key
            seen.add(key)


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


def _bus(tmp_path, text):
    path = tmp_path / "rp.conf"
    path.write_text(text)
    conf = rp_conf.load(["--config-file", str(path)])
    return rp_conf.bus_url(conf), conf


def test_the_bus_is_the_default_transport_url_as_every_service_has_it(tmp_path):
    url, conf = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n"
                               "[oslo_messaging_rabbit]\nrabbit_quorum_queue = true\n"
                               "use_queue_manager = true\nssl = true\n"
                               f"[oslo_concurrency]\nlock_path = {tmp_path}/locks\n")
    assert url == "rabbit://u:p@mq:5672/"
    rabbit = conf.oslo_messaging_rabbit
    assert rabbit.rabbit_quorum_queue and rabbit.use_queue_manager and rabbit.ssl


def test_the_queue_manager_without_a_lock_path_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match=r"use_queue_manager needs \[oslo_concurrency\] "
                                         "lock_path"):
        _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n"
                       "[oslo_messaging_rabbit]\nuse_queue_manager = true\n")


def test_the_agents_own_transport_url_overrides_the_default(tmp_path):
    url, _ = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n"
                            "[notifications]\ntransport_url = rabbit://u:p@ironic-mq:5672/\n")
    assert url == "rabbit://u:p@ironic-mq:5672/"


def test_an_empty_transport_url_of_the_agent_means_no_bus(tmp_path):
    url, _ = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n"
                            "[notifications]\ntransport_url =\n")
    assert url is None


def test_oslo_messagings_own_default_is_no_bus(tmp_path):
    url, conf = _bus(tmp_path, "[agent]\nworkers = 2\n")
    assert url is None and conf.transport_url == "rabbit://"  # its default: localhost


def test_the_check_reaches_the_broker_over_tls_as_the_agent_does(tmp_path):
    _, conf = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5671/\n"
                             "[oslo_messaging_rabbit]\nssl = true\nssl_ca_file = /etc/ca.pem\n")
    assert preflight._ssl(conf) == {"ca_certs": "/etc/ca.pem", "cert_reqs": ssl.CERT_REQUIRED}
    _, conf = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:p@mq:5672/\n")
    assert preflight._ssl(conf) is False


def test_the_default_transport_urls_secret_is_masked_in_dumps(tmp_path, caplog):
    _, conf = _bus(tmp_path, "[DEFAULT]\ntransport_url = rabbit://u:s3cr3t@mq:5672/\n")
    with caplog.at_level(logging.DEBUG):
        conf.log_opt_values(logging.getLogger("dump"), logging.DEBUG)
    assert "transport_url" in caplog.text and "s3cr3t" not in caplog.text
