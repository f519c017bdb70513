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

"""Flavors on the command line: extra specs given as KEY=VALUE or as the JSON of
``openstack flavor show -f json``, and the resource class an operator names.

Shared by the commands; imports none of them.
"""

import json
import re
import sys

from rp_reporter import model
from rp_reporter.cli import app
from rp_reporter.sync import ironic as ironic_sync

FLAVOR_JSON_MAX = 4 * 1024 * 1024

_OLD_PROPERTY = re.compile(r"([^=,\s][^=]*?)='(.*?)'(?=, [^=,\s][^=]*?='|\s*$)", re.S)


def placement_class(name):
    """The Placement class for an operator's name, or UsageError before any write."""
    if not name or not name.strip():
        raise app.UsageError("resource class name is empty")
    if len(name) > ironic_sync.RESOURCE_CLASS_MAX:
        raise app.UsageError(f"resource class name is {len(name)} characters; Ironic takes at "
                             f"most {ironic_sync.RESOURCE_CLASS_MAX}")
    normalized, problem = model.normalize_resource_class(name)
    if problem:
        raise app.UsageError(problem)
    return normalized


def spec_pairs(pairs):
    specs = {}
    for pair in pairs:
        if "=" not in pair:
            raise app.UsageError(f"{pair!r}: want KEY=VALUE")
        key, value = pair.split("=", 1)
        specs[key] = value
    return specs


def parse_properties(value, source):
    """A flavor's extra specs from ``openstack flavor show -f json``'s "properties":
    a mapping, or (older clients) a string ``key='value', key2='value2'``."""
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, str):
        specs, end = {}, 0
        for m in _OLD_PROPERTY.finditer(value):
            if value[end:m.start()].strip(", ") != "":
                break
            specs[m.group(1).strip()] = m.group(2)
            end = m.end()
        if value[end:].strip(", "):
            raise app.UsageError(f"{source}: cannot read properties from "
                                 f"{value[end:end + 60]!r} (want key='value', ...)")
        return specs
    raise app.UsageError(f"{source}: properties is a {type(value).__name__}, want a mapping "
                         "or a string")


def load_flavors(path):
    """[(name, extra specs)] from a file (``-``: stdin) holding the JSON of ``openstack
    flavor show -f json`` (or a list of such objects)."""
    source = "stdin" if path == "-" else path
    try:
        if path == "-":
            text = sys.stdin.read(FLAVOR_JSON_MAX + 1)
        else:
            with open(path, encoding="utf-8") as f:
                text = f.read(FLAVOR_JSON_MAX + 1)
    except (OSError, UnicodeDecodeError) as e:
        raise app.UsageError(f"{source}: {getattr(e, 'strerror', None) or e}") from None
    if len(text) > FLAVOR_JSON_MAX:
        raise app.UsageError(f"{source}: more than {FLAVOR_JSON_MAX} bytes")
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise app.UsageError(f"{source}: not JSON ({e})") from None
    docs = doc if isinstance(doc, list) else [doc]
    flavors = []
    for i, item in enumerate(docs):
        if not isinstance(item, dict):
            raise app.UsageError(f"{source}: [{i}] is not a flavor object")
        specs = item.get("properties", item.get("extra_specs"))
        name = str(item.get("name") or item.get("id") or f"{source}[{i}]")
        flavors.append((name, parse_properties(specs, source)))
    return flavors


def flavor_class(specs):
    """The custom class a flavor's specs ask one of, or None."""
    return next((k[len("resources:"):] for k, v in specs.items()
                 if k.startswith("resources:CUSTOM_") and str(v).strip() == "1"), None)
