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

"""The local stack's bus shapes, as the agents' configuration names them (no service
is started)."""

from rp_reporter import conf as rp_conf
from tools import localstack


def loaded(stack, tmp_path):
    path = tmp_path / "rp.conf"
    path.write_text(stack.reporter_conf())
    return rp_conf.load(["--config-file", str(path)])


def test_the_plain_bus_is_the_agents_own_transport_url(tmp_path):
    stack = localstack.LocalStack(str(tmp_path / "stack"))
    conf = loaded(stack, tmp_path)
    assert rp_conf.bus_url(conf) == stack.transport_url == conf.notifications.transport_url
    assert not conf.oslo_messaging_rabbit.ssl


def test_the_deployed_bus_is_named_as_every_service_names_it(tmp_path):
    stack = localstack.LocalStack(str(tmp_path / "stack"), bus="tls-quorum")
    conf = loaded(stack, tmp_path)
    assert conf.notifications.transport_url is None
    assert rp_conf.bus_url(conf) == conf.transport_url == stack.transport_url
    assert f":{stack.ports['rabbitmq_tls']}/" in stack.transport_url
    rabbit = conf.oslo_messaging_rabbit
    assert rabbit.ssl and rabbit.ssl_ca_file.endswith("rabbitmq/ca.pem")
    assert rabbit.rabbit_quorum_queue and rabbit.use_queue_manager
    assert conf.oslo_concurrency.lock_path == f"{stack.workdir}/locks"
