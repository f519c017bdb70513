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

"""Each node's problem is logged once, whatever per-call text its message carries,
and what is remembered is only what the last pass still saw."""

import logging

from rp_reporter.problems import ProblemLog

LOG = logging.getLogger("test_problems")


def warnings(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_kind_of_problem_is_logged_once_whatever_its_request_id(caplog):
    problems = ProblemLog(LOG)
    for i in range(100):  # a hundred passes, each error with its own request id
        problems.start_pass()
        problems.note("n1", f"derived traits not written: 400 (Request-ID: req-{i})",
                      kind="derived traits not written")
        problems.end_pass()
    assert warnings(caplog) == ["node n1: derived traits not written: 400 (Request-ID: req-0)"]
    assert len(problems) == 1


def test_a_problem_that_clears_is_forgotten_and_logged_again_when_it_returns(caplog):
    problems = ProblemLog(LOG)
    problems.start_pass()
    problems.note("n1", "skipped: node has no resource_class")
    problems.end_pass()
    problems.start_pass()  # fixed: this pass does not note it
    problems.end_pass()
    assert len(problems) == 0
    problems.start_pass()
    problems.note("n1", "skipped: node has no resource_class")
    problems.end_pass()
    assert len(warnings(caplog)) == 2


def test_memory_is_bounded_by_the_problems_of_the_last_pass():
    problems = ProblemLog(LOG)
    for p in range(50):  # a different set of failing nodes each pass
        problems.start_pass()
        for n in range(100):
            problems.note(f"node-{p}-{n}", "boom", kind="x")
        problems.end_pass()
    assert len(problems) == 100


def test_only_sets_a_nodes_problems_for_callers_without_passes(caplog):
    problems = ProblemLog(LOG)
    for _ in range(3):
        problems.replace("n1", ["offers nothing: no class", "traits refused: x"])
    problems.replace("n1", ["traits refused: x"])
    problems.replace("n1", ["offers nothing: no class", "traits refused: x"])
    assert warnings(caplog) == ["node n1: offers nothing: no class", "node n1: traits refused: x",
                                "node n1: offers nothing: no class"]
    problems.replace("n1", [])
    assert len(problems) == 0


def test_a_node_left_to_another_sync_keeps_its_problems(caplog):
    problems = ProblemLog(LOG)
    problems.start_pass()
    problems.note("n1", "refused (req-1)", kind="refused")
    problems.end_pass()
    problems.start_pass()
    problems.keep("n1")  # this pass does not judge n1
    problems.end_pass()
    assert len(problems) == 1
    problems.note("n1", "refused (req-2)", kind="refused")  # the other sync's try
    assert warnings(caplog) == ["node n1: refused (req-1)"]
