"""tools/wait.py: the one polling wait of the tools and the tests."""

import time

import pytest

from tools.wait import NotSeen
from tools.wait import wait_for


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
