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

"""tools/wait.py: the one polling wait of the tools and the tests."""

import time

import pytest

from tools.wait import NotSeen
from tools.wait import wait_for
from tools.wait import wait_until


def test_the_time_the_check_first_held_is_returned():
    answers = iter([False, False, True])
    before = time.monotonic()
    held = wait_for(lambda: next(answers), 5, "the third look", interval=0.01)
    assert before < held <= time.monotonic()


def test_a_check_that_never_holds_names_what_was_awaited():
    with pytest.raises(AssertionError, match=r"^not seen within 0.05 s: the provider$"):
        wait_for(lambda: False, 0.05, "the provider", interval=0.01)


def test_an_ignored_exception_counts_as_not_yet():
    answers = iter([ConnectionError, ConnectionError, True])

    def check():
        answer = next(answers)
        if answer is ConnectionError:
            raise ConnectionError("not answering yet")
        return answer
    assert wait_for(check, 5, "a service", interval=0.01, ignore=Exception)


def test_any_other_exception_is_raised():
    def check():
        raise ConnectionError("down")
    with pytest.raises(ConnectionError):
        wait_for(check, 5, "a service", interval=0.01)
    with pytest.raises(NotSeen):
        wait_for(check, 0.05, "a service", interval=0.01, ignore=ConnectionError)


def test_wait_until_returns_the_first_value_accepted():
    reads = iter([{"status": "BUILD"}, {"status": "BUILD"}, {"status": "ACTIVE"}])
    found = wait_until(lambda: next(reads), lambda s: s["status"] == "ACTIVE", 5,
                       "the server built", interval=0.01)
    assert found == {"status": "ACTIVE"}


def test_wait_until_names_the_last_value_it_read():
    with pytest.raises(NotSeen, match=r"^not seen within 0.05 s: built; last seen: BUILD$"):
        wait_until(lambda: "BUILD", lambda s: s == "ACTIVE", 0.05, "built", interval=0.01)
