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

"""The ``rp-reporter`` cliff application and what every command shares."""

import logging
import sys

from cliff import app
from cliff import commandmanager
from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter import log as rp_log
from rp_reporter import traits
from rp_reporter import version
from rp_reporter import wiring

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
LOG = logging.getLogger(__name__)


class UsageError(Exception):
    """Bad input or configuration: one line to the user, exit 2, nothing written."""


class ReporterApp(app.App):
    def __init__(self):
        super().__init__(
            description="Keep Placement's resource providers in step with Ironic's nodes.",
            version=version.version_info.version_string(),
            command_manager=commandmanager.CommandManager("rp_reporter.cli"),
            deferred_help=True)
        self._conf = None

    NAME = "rp-reporter"
    # The console shows warnings and errors (-v: what each node got, --debug: all);
    # the command's rows go to stdout, its one-line errors to stderr.
    DEFAULT_VERBOSE_LEVEL = 0
    # Client libraries that log their own view of a failure we report in one line.
    QUIET_LOGGERS = ("keystoneauth", "ironicclient")

    def configure_logging(self):
        super().configure_logging()
        self._quiet_libraries()

    def _quiet_libraries(self):
        if self.options.verbose_level < 2:  # -v or --debug shows them again
            for name in self.QUIET_LOGGERS:
                logging.getLogger(name).setLevel(logging.CRITICAL)

    def build_option_parser(self, description, version, argparse_kwargs=None):
        argparse_kwargs = dict(argparse_kwargs or {}, prog=self.NAME)
        parser = super().build_option_parser(description, version, argparse_kwargs)
        parser.add_argument("--config-file", action="append", default=[], metavar="FILE",
                            help="rp_reporter configuration file (repeatable).")
        parser.add_argument("--config-dir", action="append", default=[], metavar="DIR",
                            help="Directory whose .conf files are read (repeatable).")
        return parser

    @property
    def conf(self):
        """The parsed configuration, loaded on first use (UsageError if it is bad)."""
        if self._conf is None:
            argv = [a for f in self.options.config_file for a in ("--config-file", f)]
            argv += [a for d in self.options.config_dir for a in ("--config-dir", d)]
            try:
                self._conf = rp_conf.load(argv)
                wiring.check(self._conf)
            except (cfg.Error, ValueError) as e:
                raise UsageError(f"bad configuration: {e}") from None
            try:  # log_file, use_journal, use_syslog: beside the console, never on it
                rp_log.setup_cli(self._conf)
            except (OSError, RuntimeError, TypeError, ValueError) as e:
                raise UsageError(f"bad logging configuration: {e}") from None
            self._quiet_libraries()  # oslo.log's default_log_levels set them again
        return self._conf


def add_rules_option(parser):
    """--rules, as every command that reads capability rules takes it."""
    parser.add_argument("--rules", metavar="FILE",
                        help="Capability rule file (default: [traits] rules_file, else the "
                             "built-in rules).")


def resolve_rules(rules_path, conf=None):
    """--rules FILE, else ``[traits] rules_file``, else the built-in rules; a bad file
    is a UsageError (one line, exit 2, nothing written)."""
    path = rules_path or (conf.traits.rules_file if conf is not None else None)
    if not path:
        return traits.DEFAULT_RULES
    try:
        return traits.load_rules(path)
    except traits.RulesError as e:
        raise UsageError(f"bad rule file: {e}") from None


def exit_code_of(error):
    """A service error's exit status: bad configuration or grants 2, anything else 1."""
    return EXIT_USAGE if error.kind in (errors.DENIED, errors.MISCONFIGURED) else EXIT_FAILED


class CommandMixin:
    """Exit codes: 0 done, 1 something failed (listed), 2 bad input or configuration
    (Keystone refused the credentials, no endpoint in the catalog, a permission
    missing: nothing written).  Every error is one line naming its section."""

    exit_code = EXIT_OK

    def run(self, parsed_args):
        try:
            return super().run(parsed_args) or self.exit_code
        except UsageError as e:
            print(f"rp-reporter: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        except errors.ServiceError as e:
            print(f"rp-reporter: error: {e}", file=sys.stderr)
            return exit_code_of(e)

    def warn(self, message):
        """One line on stderr for the operator, beside the command's rows."""
        print(f"rp-reporter: {message}", file=sys.stderr)


def main(argv=None):
    return ReporterApp().run(sys.argv[1:] if argv is None else argv)
