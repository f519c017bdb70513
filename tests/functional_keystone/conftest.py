"""The production-shaped stack (MariaDB, Keystone, etcd), started once per session,
with the same fixtures as tests/functional: those are imported from there, only
``stack`` differs (never skipped: a service that cannot start is an error)."""

import pytest

from tests.functional.conftest import agents  # noqa: F401
from tests.functional.conftest import cli  # noqa: F401
from tests.functional.conftest import conf_file  # noqa: F401
from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import reconciler  # noqa: F401
from tests.functional.conftest import reporter_conf  # noqa: F401
from tests.functional.conftest import running_stack
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import write_conf  # noqa: F401
from tools import localstack


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory, **localstack.PRODUCTION)
