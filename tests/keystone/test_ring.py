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
