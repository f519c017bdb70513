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

"""The agent's trait rules (``[traits] rules_file``): loaded at start, where a
bad file is one line and exit 2, and again on SIGHUP, where a bad file keeps
the rules in force."""

from rp_reporter import traits
from rp_reporter.sync import capability_traits


def load_rules(conf):
    """The trait rules of ``[traits] rules_file``, or None when it is unset; a bad
    file raises ValueError, in one line naming the option, the file and the place."""
    path = conf.traits.rules_file
    if not path:
        return None
    try:
        return traits.load_rules(path)
    except traits.RulesError as e:
        raise ValueError(f"[traits] rules_file: {e}") from None


def node_traits(ironic, rules, tenancy=None):
    """The derived-trait writer for these rules and tenancy's public trait (None:
    no derived traits at all)."""
    if rules is None and tenancy is None:
        return None
    return capability_traits.NodeTraits(ironic, rules, tenancy)
