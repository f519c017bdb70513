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

# nova-compute's concurrency, set up as nova's own commands and tests do it: nova 31 to
# 33 patch eventlet when nova.monkey_patch is imported (nova.cmd and nova.test import it
# first; nova's code counts on it: its provider cache copy holds a lock that only a
# green one lets copy.deepcopy copy); nova 34 runs native threads, patching nothing here.
import nova.monkey_patch  # noqa: E402,F401,I001

from tests.functional.conftest import ironic  # noqa: F401
from tests.functional.conftest import placement  # noqa: F401
from tests.functional.conftest import shard  # noqa: F401
from tests.functional.conftest import stack  # noqa: F401
