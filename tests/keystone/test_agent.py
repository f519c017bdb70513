"""The agent's fast path behind Keystone: every kind of change, through the catalog
and tokens (test_tokens.py: past the tokens' lifetime)."""

import pytest

from tests.functional.test_agent import test_fast_path_carries_each_kind_of_change  # noqa: F401

pytestmark = pytest.mark.functional
