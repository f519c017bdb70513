"""What more than one test directory shares."""

import pytest


@pytest.fixture(scope="session")
def nova_cloud_stack(tmp_path_factory):
    """One whole nova cloud (localstack's nova-cloud profile) for the session: the
    nova_ha and nova_cloud suites run on the same one, each in its own Ironic shards,
    resource classes and compute hosts (a whole cloud takes minutes to start)."""
    from tools import localstack  # only the suites that run a whole nova need it
    stack = localstack.LocalStack(str(tmp_path_factory.mktemp("cloud")),
                                  **localstack.PROFILES["nova-cloud"])
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
