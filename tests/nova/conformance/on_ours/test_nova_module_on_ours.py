"""nova's own Ironic driver test module, run on rp_reporter.nova_compute.IronicDriver.

nova's tests build ``ironic_driver.IronicDriver(...)`` and patch
``ironic_driver.IronicDriver`` in decorators evaluated at import, so the name is
rebound to the subclass before nova's module is imported (in its own stestr
run: ``python -m tests.nova.conformance.check``).  The test ids stay nova's.  Not for
pytest (tests/nova/conformance/conftest.py ignores this directory).
"""

from nova.virt.ironic import driver as ironic_driver

from rp_reporter import nova_compute

assert issubclass(nova_compute.IronicDriver, ironic_driver.IronicDriver)
ironic_driver.IronicDriver = nova_compute.IronicDriver

from nova.tests.unit.virt.ironic.test_driver import *  # noqa: E402,F401,F403
