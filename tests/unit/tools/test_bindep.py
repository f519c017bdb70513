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

"""bindep.txt is what the stacks' installer reads: each profile a service of the stacks,
each service that runs a system program with its package on Debian and RPM platforms."""

import pytest

from tools.localstack import process
from tools.localstack import stack

SYSTEM_SERVICES = ("rabbitmq", "redis", "mariadb", "etcd")


def test_every_profile_is_a_service_of_the_stacks_or_the_tests():
    services = {module.NAME for module, _ in stack.SERVICES}
    assert set(process.bindep().profiles()) <= services | {"test"}
    assert set(SYSTEM_SERVICES) <= services


@pytest.mark.parametrize("platform", ["platform:dpkg", "platform:rpm"])
@pytest.mark.parametrize("service", SYSTEM_SERVICES)
def test_each_system_service_has_its_package(service, platform):
    rules = process.bindep().active_rules([platform, service])
    assert [name for name, selectors, _ in rules
            if (True, service) in selectors], f"no {platform} package for {service}"

