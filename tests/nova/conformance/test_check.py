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

"""The conformance check's rules (tests/nova/conformance/check.py), on made-up results."""

from tests.nova.conformance import check as nova_module

A, B, C = (f"{nova_module.MODULE}.IronicDriverTestCase.test_{n}" for n in "abc")


def test_the_list_is_read_with_a_reason_per_test():
    listed = nova_module.deliberate_differences()
    assert listed and all(reason for reason in listed.values())
    assert all(test.startswith(nova_module.MODULE + ".") for test in listed)


def test_conformant_when_only_listed_tests_differ():
    nova = {A: "success", B: "success", C: "fail"}
    ours = {A: "success", B: "fail", C: "fail"}  # C fails on nova's class too: not ours to fix
    assert nova_module.compare(nova, ours, {B: "why"}) == []


def test_an_unlisted_failure_fails_the_check():
    problems = nova_module.compare({A: "success"}, {A: "fail"}, {})
    assert len(problems) == 1 and "not listed" in problems[0]


def test_a_listed_test_that_passes_on_ours_or_fails_on_novas_fails_the_check():
    assert "passes on ours" in nova_module.compare({A: "success"}, {A: "success"}, {A: "x"})[0]
    assert "does not pass on nova's" in nova_module.compare({A: "fail"}, {A: "fail"},
                                                            {A: "x"})[0]
