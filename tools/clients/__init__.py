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

"""The HTTP clients the tests, demos and benchmarks drive the real services with.

They play the operator, nova and foreign writers; the code under test never uses
them.  One module per service (ironic, placement, nova, and agent: an agent's own
/healthz and /metrics), common.py for what they share (the session, the one place
that decides whether a request is sent again, REPEATS, the Keystone token).  This
module only names what others import:

    from tools import clients
    ironic = clients.Ironic(stack.ironic_url, "shard")
"""

from tools.clients.agent import health
from tools.clients.agent import metrics
from tools.clients.common import REPEATS
from tools.clients.common import KeystoneToken
from tools.clients.common import call
from tools.clients.common import session
from tools.clients.ironic import IRONIC_SLOTS
from tools.clients.ironic import Ironic
from tools.clients.nova import Nova
from tools.clients.placement import PLACEMENT_HEADERS
from tools.clients.placement import Placement

__all__ = ["IRONIC_SLOTS", "PLACEMENT_HEADERS", "REPEATS", "Ironic", "KeystoneToken", "Nova",
           "Placement", "call", "health", "metrics", "session"]
