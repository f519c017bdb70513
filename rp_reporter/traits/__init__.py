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

"""Node capabilities and properties as traits; flavors' capability specs as trait specs.

Operators match flavors to hardware with nova's ``ComputeCapabilitiesFilter``
(``capabilities:boot_mode=uefi`` in a flavor against ``properties/capabilities``
on the Ironic node, ``"boot_mode:uefi,secure_boot:true"``).  Placement does the
same match with traits, if the node carries them.  This package is the pure core,
one module a concept:

* ``names``: the custom trait a value becomes (``normalize``), and why Placement
  would refuse a name (``trait_problem``);
* ``rules``: a rule file (YAML) says which capability keys and values, and which other
  node properties (``cpu_arch``, ``vendor``, ``memory_mb``/``cpus``/``local_gb``
  ranges), become which trait names (``rules_from_dict``, ``load_rules``,
  ``DEFAULT_RULES``);
* ``nova_filter``: ``parse_capabilities`` reads the capability string exactly as nova's
  Ironic driver does; ``capabilities_match`` is our reading of nova's filter on one node;
* ``derive``: ``derive_traits`` gives a node's derived traits, ``derive_problems`` what
  it skipped, ``trait_changes`` what to add and remove (never a trait this tool did
  not add: the record of what it added lives in the node's ``extra``, ``RECORD_KEY``);
* ``flavors``: ``translate_flavor`` turns a flavor's capability specs into required
  traits, only where the result selects exactly the nodes nova's filter passes.

Nothing here does I/O except ``load_rules`` reading its one file, and nothing imports
a service client: writing the traits to Ironic is ``rp_reporter.sync.capability_traits``.
Other packages use the names below, not the modules.
"""

from rp_reporter.traits.derive import RECORD_KEY
from rp_reporter.traits.derive import TraitChanges
from rp_reporter.traits.derive import capability_trait
from rp_reporter.traits.derive import derive_problems
from rp_reporter.traits.derive import derive_traits
from rp_reporter.traits.derive import recorded_traits
from rp_reporter.traits.derive import trait_changes
from rp_reporter.traits.flavors import BAREMETAL_ZERO
from rp_reporter.traits.flavors import Translation
from rp_reporter.traits.flavors import flavor_extra_specs
from rp_reporter.traits.flavors import translate_capability
from rp_reporter.traits.flavors import translate_flavor
from rp_reporter.traits.names import normalize
from rp_reporter.traits.names import trait_problem
from rp_reporter.traits.nova_filter import capabilities_match
from rp_reporter.traits.nova_filter import host_stats
from rp_reporter.traits.nova_filter import match_spec
from rp_reporter.traits.nova_filter import parse_capabilities
from rp_reporter.traits.rules import DEFAULT_RULES
from rp_reporter.traits.rules import RULES_MAX_BYTES
from rp_reporter.traits.rules import RangeRule
from rp_reporter.traits.rules import Rules
from rp_reporter.traits.rules import RulesError
from rp_reporter.traits.rules import ValueRule
from rp_reporter.traits.rules import load_rules
from rp_reporter.traits.rules import rules_from_dict

__all__ = [
    "BAREMETAL_ZERO",
    "DEFAULT_RULES",
    "RECORD_KEY",
    "RULES_MAX_BYTES",
    "RangeRule",
    "Rules",
    "RulesError",
    "TraitChanges",
    "Translation",
    "ValueRule",
    "capabilities_match",
    "capability_trait",
    "derive_problems",
    "derive_traits",
    "flavor_extra_specs",
    "host_stats",
    "load_rules",
    "match_spec",
    "normalize",
    "parse_capabilities",
    "recorded_traits",
    "rules_from_dict",
    "trait_changes",
    "trait_problem",
    "translate_capability",
    "translate_flavor",
]
