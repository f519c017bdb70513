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

"""The real stack for the nova driver's tests (same fixtures as tests/functional)."""

# nova-compute's concurrency, set up as its own command sets it up on each release
# (nova's code counts on it: nova 31's provider cache copy holds a lock only a green
# one lets copy.deepcopy copy): nova 31 patches eventlet when nova.monkey_patch is
# imported; 32 and 33 call patch() (eventlet unless OS_NOVA_DISABLE_EVENTLET_PATCHING);
# 34 calls patch(backend="threading").
from nova import monkey_patch  # noqa: E402,I001

from tools.localstack import releases  # noqa: E402,I001

if hasattr(monkey_patch, "patch"):
    if releases.current().nova_compute_runs == "threading":
        monkey_patch.patch(backend="threading")
    else:
        monkey_patch.patch()

from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import stack  # noqa: F401
