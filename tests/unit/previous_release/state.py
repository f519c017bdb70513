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

"""State that survives the process: a JSON document per reporter and key.

Each key (``absent_since``, ``observations``) has a file of its own beside the
reporter's base path (``rp_reporter-HOST.observations.json``), so saving one
never reads the others: at 100,000 nodes, parsing the saved observations again
to keep the small keys beside them cost 16 MiB at every save.  A document is
written as it is encoded, to a temporary file renamed over the old one, so a crash
leaves the previous document, never half of one.  A document written for another
deployment (a different identity: endpoints, credentials' user, scope) is
ignored, as is a missing or corrupt one: each costs what it saves (for absences,
one more interval before a deletion), never a wrong write.  The one file of
earlier releases (all keys in the base path) is still read for a key that has
no file of its own yet.
"""

import contextlib
import hashlib
import json
import logging
import os
import tempfile

import ijson

LOG = logging.getLogger(__name__)

FORMAT = 1


def key_path(base, key):
    """The file of ``key`` beside the reporter's base path."""
    root, ext = os.path.splitext(base)
    return f"{root}.{key}{ext or '.json'}"


def identity_hash(identity):
    """One string for a deployment's identity (services, users, scope)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


class StateFile:
    persistent = True

    def __init__(self, path, identity):
        self.path = path  # the base path: every key's file is named after it
        self.identity = identity_hash(identity)

    def key_path(self, key):
        return key_path(self.path, key)

    def load(self, key):
        """The value saved under ``key``, or None (missing, corrupt or foreign file)."""
        for path in (self.key_path(key), self.path):  # its own file, then the one of old
            try:
                with open(path) as f:
                    document = json.load(f)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:
                LOG.warning("state file %s unreadable, starting afresh: %s", path, e)
                return None
            return self._value(path, document, key)
        return None

    @contextlib.contextmanager
    def reading(self, key, parts, streamed):
        """``key``'s value as ``load`` gives it (None likewise), read from its file as it
        is used: its members ``parts`` whole, its member ``streamed`` (an object) as
        the (name, value) pairs of an iterator, so the document is never whole in
        memory (100,000 saved observations cost 17 MiB more at a start read whole).
        The pairs can be taken inside the ``with`` only; a file found corrupt there
        raises ValueError."""
        for path in (self.key_path(key), self.path):  # its own file, then the one of old
            try:
                file = open(path, "rb")
            except FileNotFoundError:
                continue
            with file:
                try:
                    value = self._streamed_value(path, file, key, parts, streamed)
                except (OSError, ValueError, ijson.JSONError) as e:
                    LOG.warning("state file %s unreadable, starting afresh: %s", path, e)
                    value = None
                yield value
            return
        yield None

    def _streamed_value(self, path, file, key, parts, streamed):
        def first(prefix, default=None):  # the item at ``prefix``, read from the start
            file.seek(0)
            return next(ijson.items(file, prefix, use_float=True), default)
        if not self._accepted(path, {"format": first("format"),
                                     "identity": first("identity")}):
            return None
        value = {part: first(f"values.{key}.{part}") for part in parts}
        if all(v is None for v in value.values()):
            return None  # no value for the key in this file
        file.seek(0)
        value[streamed] = _pairs(ijson.kvitems(file, f"values.{key}.{streamed}",
                                               use_float=True))
        return value

    def _accepted(self, path, document):
        """The document is in this format and of this deployment (a line if not)."""
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            LOG.warning("state file %s is not in format %d, starting afresh", path, FORMAT)
            return False
        if document.get("identity") != self.identity:
            LOG.warning("state file %s was written for another deployment (endpoints, user or "
                        "scope differ), starting afresh", path)
            return False
        return True

    def _value(self, path, document, key):
        if not self._accepted(path, document):
            return None
        values = document.get("values")
        return values.get(key) if isinstance(values, dict) else None

    def save(self, key, value):
        """Replace ``key``'s value.  Failures are logged, not raised."""
        path = self.key_path(key)
        directory = os.path.dirname(path) or "."
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".state-")
            try:
                with os.fdopen(fd, "w") as f:
                    # dump, not dumps: the text is never whole in memory (dumps' faster
                    # C encoder held 14 MiB more at 100,000 nodes; dump takes 0.2 s).
                    json.dump({"format": FORMAT, "identity": self.identity,
                               "values": {key: value}}, f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as e:
            LOG.warning("cannot write state file %s: %s", path, e)


def _pairs(items):
    """ijson's pairs, its errors as ValueError (a corrupt file)."""
    try:
        yield from items
    except ijson.JSONError as e:
        raise ValueError(f"corrupt: {e}") from None


class InMemory:
    """No state_path: the same interface, for one process's life."""

    persistent = False

    def __init__(self):
        self._values = {}

    def load(self, key):
        return self._values.get(key)

    @contextlib.contextmanager
    def reading(self, key, parts, streamed):
        yield self._values.get(key)

    def save(self, key, value):
        self._values[key] = value
