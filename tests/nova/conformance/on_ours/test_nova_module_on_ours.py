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
