"""The real stack for the nova driver's tests (same fixtures as tests/functional)."""

from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import stack  # noqa: F401
