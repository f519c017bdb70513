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
