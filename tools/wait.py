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

"""The one polling wait of the tools and the tests: ask ``check`` until it holds.

    from tools.wait import wait_for
    wait_for(lambda: placement.provider(node), 30, "the node's provider")
    server = wait_until(lambda: nova.server(sid), built, 180, "server built")
"""

import time


class NotSeen(AssertionError):
    """What ``wait_for`` raises when ``check`` never held (an AssertionError, so a test
    that times out fails rather than errors)."""


def wait_for(check, timeout, what, interval=0.05, ignore=()):
    """The monotonic time ``check()`` first held, asked every ``interval`` seconds.

    An exception of a type in ``ignore`` counts as not yet (``Exception`` for a service
    that may not answer yet); any other is raised.  After ``timeout`` seconds, NotSeen
    naming ``what``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return time.monotonic()
        except ignore:
            pass
        time.sleep(interval)
    raise NotSeen(f"not seen within {timeout} s: {what}")


def wait_until(read, done, timeout, what, interval=0.05, ignore=()):
    """The first value of ``read()`` that ``done`` accepts (``wait_for`` on it, for the
    waits that want what they saw).  NotSeen names ``what`` and the last value read."""
    seen = []

    def check():
        seen[:] = [read()]
        return done(seen[0])

    try:
        wait_for(check, timeout, what, interval, ignore)
    except NotSeen as gone:
        last = seen[0] if seen else "nothing read"
        raise NotSeen(f"{gone}; last seen: {last}") from None
    return seen[0]
