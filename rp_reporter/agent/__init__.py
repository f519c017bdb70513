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

"""The daemon that keeps Placement fresh (``rp-reporter-agent``).

* ``cmd``: the command line: configuration, logging, signals;
* ``service``: the agent: builds the pieces below, passing each what it calls,
  and runs the reconcile loop, start to stop;
* ``controller``: notifications and the resync name nodes, one work queue
  syncs them through one sync function (``sync/node.py``);
* ``resync``: the periodic reconcile pass and its deletion policy;
* ``slice_wait``: a member's wait for the lister's slice before its pass;
* ``latency``: the fast path's clock, notification to Placement's answer;
* ``ownership``: membership, the ring, fencing, and the guards before writes;
* ``health``: what /healthz says, and the threads kept alive;
* ``listing_bus``: the shared listing's carrier, sender and receiver;
* ``rules``: the trait rules, loaded and reloaded.
"""

from rp_reporter.agent.cmd import main
from rp_reporter.agent.rules import load_rules
from rp_reporter.agent.service import Agent

__all__ = ["Agent", "load_rules", "main"]
