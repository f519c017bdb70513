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

"""Trait names: the custom trait a value becomes, and why Placement would refuse a name.

Pure.  Also the two helpers every message of this package is written with
(``one_line``, ``type_name``).
"""

import re

import os_traits

from rp_reporter import model

CUSTOM = os_traits.CUSTOM_NAMESPACE
CAP_PREFIX = "CUSTOM_CAP_"

# Values that make a trait where nova's filter compares them (capabilities, cpu_arch):
# exactly the spellings upper() maps one to one onto trait names.  'UEFI' and 'uefi',
# or 'gpt-x' and 'gpt_x', are two values to nova but would be one trait, and a
# translated flavor would then pick nodes nova's filter does not.
EXACT_VALUE_RE = re.compile(r"^[a-z0-9_]+$")
# Property values no flavor spec is translated against: folding their spellings
# into one trait cannot make Placement pick what nova would not.
FOLDED_PROPERTIES = ("vendor",)


def one_line(text, limit=400):
    """``text`` on one line, cut to ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def type_name(value):
    """A value's type as a message names it (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def normalize(text):
    """Upper case; each character outside A-Z, 0-9 and ``_`` becomes one ``_``."""
    return re.sub(r"[^A-Z0-9_]", "_", str(text).upper())


def trait_problem(name):
    """Why Placement (and Ironic) would refuse this custom trait name, or None."""
    if not isinstance(name, str) or not name:
        return "trait name is empty"
    if len(name) > model.NAME_MAX:
        return f"trait name is {len(name)} characters; Placement takes at most {model.NAME_MAX}"
    if not model.NAME_RE.match(name):
        return f"trait name {name!r} is not ^[A-Z0-9_]+$"
    if not name.startswith(CUSTOM) or name == CUSTOM:
        return f"trait name {name!r} does not start with CUSTOM_ (and something after it)"
    if name.startswith(model.OWN_PREFIX):
        return f"trait name {name!r} is in rp_reporter's own namespace {model.OWN_PREFIX}*"
    return None


def valued_trait(prefix, value, exact=True):
    """(trait, problem): the trait for a value under a prefix, or why there is none."""
    if exact and not EXACT_VALUE_RE.match(value):
        return None, (f"{one_line(value, 80)!r} makes no trait: only values of a-z, 0-9 and _ "
                      "do (nova's filter tells spellings apart that one trait name would merge)")
    name = prefix + normalize(value)
    problem = trait_problem(name)
    return (None, problem) if problem else (name, None)
