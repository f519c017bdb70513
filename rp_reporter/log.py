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

"""Logging as every OpenStack service logs: oslo.log, and systemd's readiness.

The agent logs through oslo.log: ``log_file`` / ``log_dir`` (a watched file,
reopened on SIGHUP and whenever it is moved away), ``use_json``,
``use_journal``, ``use_syslog``, ``use_stderr``, ``debug``, the format strings
and ``default_log_levels``, all plain configuration.  Without any of them it
logs to stderr (under systemd: the journal).

``use_journal`` speaks journald's native protocol.  oslo.log's journal handler
needs the ``systemd`` Python bindings (a C extension); where they are missing,
a small sender of the same protocol stands in for them (``_NativeJournal``), so
the option works by configuration alone.

The CLI keeps its own console (one line per error on stderr); oslo.log adds
a file, the journal or syslog to it only when one is configured.
"""

import logging
import os
import socket
import struct
import sys

from oslo_log import formatters as oslo_formatters
from oslo_log import handlers as oslo_handlers
from oslo_log import log as oslo_log

PRODUCT = "rp_reporter"
JOURNAL_SOCKET = "/run/systemd/journal/socket"
# Beside oslo.log's defaults: the listener's own chatter is not news.
EXTRA_LOG_LEVELS = ("oslo_messaging=WARN", "oslo.messaging=WARN", "tooz=WARN")


def default_log_levels():
    levels = [lv for lv in oslo_log.get_default_log_levels()
              if lv.partition("=")[0] not in {e.partition("=")[0] for e in EXTRA_LOG_LEVELS}]
    return levels + list(EXTRA_LOG_LEVELS)


def register_options(conf):
    """oslo.log's options (before the command line is parsed), our defaults.

    oslo.log keeps the first process-wide configuration it is given for its
    formatters; inside nova-compute (the driver reads rp_reporter's own file)
    that stays nova's.
    """
    global_conf = oslo_formatters._CONF
    oslo_log.register_options(conf)
    if global_conf is not None:
        oslo_formatters._store_global_conf(global_conf)
    conf.set_default("default_log_levels", default_log_levels())


def set_defaults():
    """Our defaults of oslo.log's options, set on oslo.log itself: what the
    ``oslo.config.opts.defaults`` entry point gives oslo-config-generator, so the
    ``oslo.log`` namespace of the sample shows them."""
    oslo_log.set_defaults(default_log_levels=default_log_levels())


class _NativeJournal:
    """``systemd.journal.send`` in a few lines: journald's native protocol.

    One datagram of fields, ``KEY=value\\n``, or ``KEY\\n<64-bit length>value\\n``
    when the value holds a newline.
    """

    socket_path = JOURNAL_SOCKET

    @staticmethod
    def _field(key, value):
        key = key.upper().encode()
        value = value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")
        if b"\n" in value:
            return key + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
        return key + b"=" + value + b"\n"

    def send(self, MESSAGE, **fields):  # noqa: N803 - systemd.journal's signature
        data = self._field("MESSAGE", MESSAGE) + b"".join(
            self._field(k, v) for k, v in fields.items() if v is not None)
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(data, self.socket_path)


def _journal_bindings():
    if oslo_handlers.journal is None:
        oslo_handlers.journal = _NativeJournal()


def _install(conf):
    """oslo.log's setup; the handlers it replaces are closed (their files too)."""
    root = logging.getLogger()
    before = list(root.handlers)
    if conf.use_journal:
        _journal_bindings()
    oslo_log.setup(conf, PRODUCT)
    for handler in before:
        if handler not in root.handlers:
            handler.close()


def setup(conf):
    """The agent's logging, at start and on every SIGHUP (which reopens the file).

    With no destination configured oslo.log falls back to stdout; the agent keeps
    logging to stderr there, as it always has (systemd journals both alike, and
    the tools that start agents keep their log files).
    """
    _install(conf)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def destination_configured(conf):
    return bool(conf.log_file or conf.log_dir or conf.use_journal or conf.use_syslog
                or conf.log_config_append)


def setup_cli(conf):
    """The CLI: add the configured file, journal or syslog to the console it has.

    Nothing changes when none is configured: the command's rows go to stdout and
    its errors, one line each, to stderr, as before.  ``use_stderr`` is the
    console's own business in the CLI and is not doubled.
    """
    if not destination_configured(conf):
        return
    root = logging.getLogger()
    console, level = list(root.handlers), root.level
    conf.set_override("use_stderr", False)
    try:
        _install(conf)
    finally:
        conf.clear_override("use_stderr")
    added = [h for h in root.handlers if h not in console]
    for handler in added:
        if type(handler) is logging.StreamHandler or isinstance(  # stdout: the command's rows
                handler, oslo_handlers.ColorHandler):
            root.removeHandler(handler)
        else:  # what the console shows is cliff's -v/-q; the file's is [DEFAULT] debug
            handler.setLevel(logging.DEBUG if conf.debug else logging.INFO)
    for handler in console:
        root.addHandler(handler)
    root.setLevel(level)


# -- systemd readiness (Type=notify) ------------------------------------------
def sd_notify(state, environ=os.environ):
    """Tell systemd (``$NOTIFY_SOCKET``) our state, e.g. ``READY=1``; False if
    not run by systemd with Type=notify.  Never raises: readiness is advice."""
    path = environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):  # an abstract socket
        path = "\0" + path[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(state.encode(), path)
    except OSError as e:
        logging.getLogger(__name__).warning("cannot notify systemd (%s): %s", path, e)
        return False
    return True
