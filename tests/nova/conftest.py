"""The real stack for the nova driver's tests (same fixtures as tests/functional)."""

from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import stack  # noqa: F401

# nova's own test module, rebound to our class: run by stestr (tests/nova/nova_module.py).
collect_ignore = ["conformance", "nova_module.py"]
