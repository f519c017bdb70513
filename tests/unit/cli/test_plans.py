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

"""cli/plans.py: a pass's plan in words (the audit's drift line)."""

from rp_reporter import model
from rp_reporter.cli import plans
from rp_reporter.sync import plan as planner
from rp_reporter.sync import provider

NODE = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
GOLD = "CUSTOM_BAREMETAL_GOLD"


def drift(desired, before):
    return plans.describe_ops(provider.Result(NODE, provider.Outcome.UPDATED,
                                              planner.plan(desired, before), before))


def test_the_drift_line_says_what_changes():
    before = planner.Observed(NODE, 3, {GOLD: model.inventory(0)},
                              frozenset({model.MANAGED_TRAIT, "CUSTOM_OLD"}), {})
    desired = model.Desired(NODE, NODE, GOLD, 1, frozenset({"CUSTOM_NEW"}))
    assert drift(desired, before) == (
        f"inventory {GOLD}:reserved=0/total=1 -> {GOLD}:reserved=1/total=1; "
        "traits +CUSTOM_NEW -CUSTOM_OLD")


def test_a_tenant_aggregate_change_is_in_the_line():
    before = planner.Observed(NODE, 3, {GOLD: model.inventory(0)},
                              frozenset({model.MANAGED_TRAIT}), {}, frozenset({"agg-p", "az"}))
    desired = model.Desired(NODE, NODE, GOLD, 0, frozenset(), aggregates=frozenset({"agg-q"}),
                            managed_aggregates=frozenset({"agg-p", "agg-q"}))
    assert drift(desired, before) == "aggregates +agg-q -agg-p"
