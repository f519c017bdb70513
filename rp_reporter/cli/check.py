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

"""``rp-reporter check``: the preflight an operator runs before starting agents."""

from cliff import lister

from rp_reporter import preflight
from rp_reporter.cli import app


class Check(app.CommandMixin, lister.Lister):
    """Whether these credentials and endpoints let the reporter do its whole job.

    One row per check (endpoints, Placement's microversion and permissions, what
    Ironic shows against what Placement holds, the notification broker, the
    coordination backend); a failed row says what to grant or fix.  Exits 0
    when nothing failed, 2 when a failure is configuration or a missing grant,
    1 when a service is only unreachable.
    """

    COLUMNS = ("check", "result", "detail")

    def take_action(self, parsed_args):
        rows = preflight.run(self.app.conf)
        self.exit_code = preflight.exit_status(rows)
        return self.COLUMNS, [(r.check, r.result, r.detail) for r in rows]
