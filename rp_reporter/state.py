"""State that survives the process: one small JSON document per reporter.

Written whole to a temporary file and renamed over the old one, so a crash
leaves the previous document, never half of one.  A document written for
another deployment (a different identity: endpoints, credentials' user,
scope) is ignored, as is a missing or corrupt one: each costs what it saves
(for absences, one more interval before a deletion), never a wrong write.
"""

import hashlib
import json
import logging
import os
import tempfile

LOG = logging.getLogger(__name__)

FORMAT = 1


class StateFile:
    persistent = True

    def __init__(self, path, identity):
        self.path = path
        self.identity = hashlib.sha256(
            json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()

    def load(self, key):
        """The value saved under ``key``, or None (missing, corrupt or foreign file)."""
        try:
            with open(self.path) as f:
                document = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            LOG.warning("state file %s unreadable, starting afresh: %s", self.path, e)
            return None
        if not isinstance(document, dict) or document.get("format") != FORMAT:
            LOG.warning("state file %s is not in format %d, starting afresh", self.path, FORMAT)
            return None
        if document.get("identity") != self.identity:
            LOG.warning("state file %s was written for another deployment (endpoints, user or "
                        "scope differ), starting afresh", self.path)
            return None
        return document.get("values", {}).get(key)

    def save(self, key, value):
        """Replace ``key``'s value; other keys stay.  Failures are logged, not raised."""
        values = {}
        try:
            with open(self.path) as f:
                document = json.load(f)
            if document.get("identity") == self.identity:
                values = document.get("values", {})
        except (OSError, ValueError, AttributeError):
            pass
        values[key] = value
        directory = os.path.dirname(self.path) or "."
        try:
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".state-")
            with os.fdopen(fd, "w") as f:
                # dumps, not dump: only the one-shot encoder is the C one.
                f.write(json.dumps({"format": FORMAT, "identity": self.identity,
                                    "values": values}))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            LOG.warning("cannot write state file %s: %s", self.path, e)


class InMemory:
    """No state_path: the same interface, for one process's life."""

    persistent = False

    def __init__(self):
        self._values = {}

    def load(self, key):
        return self._values.get(key)

    def save(self, key, value):
        self._values[key] = value
