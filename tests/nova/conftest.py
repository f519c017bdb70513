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

# nova-compute's concurrency where it is eventlet, set up as its own command sets it up
# (nova's code counts on it: nova 31's provider cache copy holds a lock only a green
# one lets copy.deepcopy copy): nova 31 patches eventlet when nova.monkey_patch is
# imported; 32 and 33 call patch() (eventlet unless OS_NOVA_DISABLE_EVENTLET_PATCHING).
# nova 34's command runs native threads, but its own test fixtures (which
# test_group_record uses) patch eventlet on import, as nova's unit tests run: nothing
# is set up here for it.
from nova import monkey_patch  # noqa: E402,I001

from tools.localstack import releases  # noqa: E402,I001

if releases.current().nova_compute_runs == "eventlet" and hasattr(monkey_patch, "patch"):
    monkey_patch.patch()

import pytest  # noqa: E402

from tests.functional.conftest import ironic  # noqa: F401,E402
from tests.functional.conftest import placement  # noqa: F401,E402
from tests.functional.conftest import running_stack  # noqa: E402
from tests.functional.conftest import shard  # noqa: F401,E402

# Ironic cuts every page it answers to this many nodes (its [api] max_limit, 1000 by
# default; an operator may set less): every listing of nova's and of the driver's here
# must read on past such pages, whatever page it asks for.
IRONIC_MAX_LIMIT = 20


@pytest.fixture(scope="session")
def stack(tmp_path_factory):
    yield from running_stack(tmp_path_factory, ironic_max_limit=IRONIC_MAX_LIMIT)
