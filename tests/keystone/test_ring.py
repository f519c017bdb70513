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

"""The hash ring on etcd: the takeover test of tests/functional/test_ring.py, run
on this stack's backend (etcd through tooz's etcd3+http driver)."""

import pytest

from tests.functional.test_ring import fleet_of  # noqa: F401
from tests.functional.test_ring import test_agents_split_the_fleet_and_survive_one_dying  # noqa: F401

pytestmark = pytest.mark.functional


@pytest.fixture
def backend(stack):
    assert stack.coordination_url.startswith("etcd3+http://")
    return stack.coordination_url
