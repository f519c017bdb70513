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

"""What more than one test directory shares."""

import pytest


def pytest_addoption(parser):
    parser.addoption("--coordination", default=None, choices=("etcd", "redis"),
                     help="The whole nova cloud's coordination backend (the nova-cloud "
                          "profile's: etcd); the HA suite's stories run on either")


@pytest.fixture(scope="session")
def nova_cloud_stack(tmp_path_factory, request):
    """One whole nova cloud (localstack's nova-cloud profile) for the session: the
    nova_ha and nova_cloud suites run on the same one, each in its own Ironic shards,
    resource classes and compute hosts (a whole cloud takes minutes to start)."""
    from tools import localstack  # only the suites that run a whole nova need it
    shape = dict(localstack.PROFILES["nova-cloud"])
    if request.config.getoption("--coordination"):
        shape["coordination"] = request.config.getoption("--coordination")
    stack = localstack.LocalStack(str(tmp_path_factory.mktemp("cloud")), **shape)
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


def pytest_collection_modifyitems(items):
    """nova_ha's tests before nova_cloud's: nova_ha's stock fleet has no Ironic shard
    and would claim the nodes of nova_cloud's topologies, which start with nova_cloud's
    first test (the sort is stable: each suite keeps its own order)."""
    items.sort(key=lambda item: not item.nodeid.startswith("tests/nova_ha/"))
