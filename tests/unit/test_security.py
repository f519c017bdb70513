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

"""Security defaults: TLS verified, loopback metrics, secrets masked, URLs validated."""

import logging

import pytest

from rp_reporter import conf as rp_conf
from rp_reporter.sync import placement as placement_sync

SECRET = "s3cret-Pa55"


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text(
        "[ironic]\nauth_type = password\nauth_url = https://keystone.example/v3\n"
        f"username = rp\npassword = {SECRET}\nuser_domain_name = Default\n"
        "project_name = service\nproject_domain_name = Default\n"
        "[placement]\nauth_type = admin_token\nendpoint = https://placement.example\n"
        f"token = {SECRET}\n"
        f"[notifications]\ntransport_url = rabbit://rp:{SECRET}@mq.example:5672/\n"
        f"[coordination]\nbackend_url = redis://:{SECRET}@redis.example:6379\n")
    return rp_conf.load(["--config-file", str(path)])


def test_tls_is_verified_by_default(conf):
    for group in ("ironic", "placement"):
        assert conf[group].insecure is False
        assert rp_conf.adapter(conf, group).session.verify is True


def test_metrics_bind_loopback_by_default(conf):
    assert conf.agent.metrics_bind.startswith("127.0.0.1:")


def test_config_dumps_mask_every_secret(conf, caplog):
    with caplog.at_level(logging.DEBUG):
        conf.log_opt_values(logging.getLogger("dump"), logging.DEBUG)
    assert "transport_url" in caplog.text and "backend_url" in caplog.text
    assert SECRET not in caplog.text


def test_nothing_but_a_uuid_reaches_a_provider_path():
    sent = []

    class Recorder:
        def request(self, *args, **kwargs):
            sent.append(args)
            raise AssertionError("no request may be sent")

    client = placement_sync.PlacementClient(Recorder(), attempts=1)
    for bad in ("../../traits", "x" * 40, None, "1be26c0b-03f2-4d2e-ae87-c02d7f33c123/../x"):
        with pytest.raises(ValueError, match="non-UUID"):
            client.observe(bad)
        with pytest.raises(ValueError, match="non-UUID"):
            client.delete_provider(bad)
    assert sent == []
