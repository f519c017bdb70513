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

"""``rp-reporter-agent``: configuration, logging and signals, then the agent runs.

SIGTERM and SIGINT stop it gracefully (in-flight syncs finish, exit 0);
SIGHUP reloads the mutable options (debug, interval, jitter) and the trait
rules, and reopens the log file.  Logging is oslo.log's (rp_reporter.log);
under systemd with Type=notify the agent says READY=1 once /healthz is served
and the listener is bound.  A bad configuration or rules file is one line on
stderr and exit 2.
"""

import logging
import os
import signal
import sys
import threading

from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import log as rp_log
from rp_reporter import wiring
from rp_reporter.agent import rules as rp_rules
from rp_reporter.agent import service

LOG = logging.getLogger("rp_reporter.agent")


def reload(agent):
    """SIGHUP's work, off the signal handler, so the main thread is never caught
    inside a log call while its handlers are replaced."""
    def run():
        agent.conf.mutate_config_files()
        rp_log.setup(agent.conf)  # reopens the log file, as OpenStack services do
        LOG.info("reloaded: interval=%s jitter=%s debug=%s; log reopened",
                 agent.conf.reconcile.interval, agent.conf.reconcile.jitter, agent.conf.debug)
        agent.reload_rules()
    threading.Thread(target=run, name="reload", daemon=True).start()


def lead_a_process_group():
    """oslo.messaging's queue manager names each queue after the process group's leader
    (it reads ``/proc/<pgrp>/stat``): an agent whose group's leader has exited (started
    by a script that ended) failed its first listener with FileNotFoundError.  Such an
    agent leads a group of its own; under systemd (a session of its own) or a live
    shell nothing changes."""
    if not os.path.exists(f"/proc/{os.getpgrp()}"):
        os.setpgrp()
        LOG.info("process group %d has no leader any more: this agent leads its own (the "
                 "bus's queue manager names queues after it)", os.getpgrp())


def main(argv=None):
    try:
        conf = rp_conf.load(sys.argv[1:] if argv is None else argv)
        wiring.check(conf)
        rp_conf.bus_url(conf)  # the bus's own options, checked before anything starts
        rules = rp_rules.load_rules(conf)
    except (cfg.Error, ValueError) as e:
        print(f"rp-reporter-agent: error: bad configuration: {e}", file=sys.stderr)
        return 2
    try:
        rp_log.setup(conf)  # oslo.log: log_file, use_json, use_journal, use_syslog, debug
    except (OSError, RuntimeError, TypeError, ValueError) as e:  # unwritable log_file, bad facility
        print(f"rp-reporter-agent: error: bad logging configuration: {e}", file=sys.stderr)
        return 2
    conf.log_opt_values(LOG, logging.DEBUG)  # oslo.config masks every secret option
    if conf.oslo_messaging_rabbit.use_queue_manager:
        lead_a_process_group()
    agent = service.Agent(conf, rules)
    if rules is not None:
        LOG.info("derived traits kept in step by the rules of %s", conf.traits.rules_file)
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    signal.signal(signal.SIGHUP, lambda signum, frame: reload(agent))
    return agent.run()
