"""``rp-reporter-agent``: the daemon.

Today it runs the reconcile loop: a pass at start, then one every
``[reconcile] interval`` seconds (with jitter so many agents do not pass in
step).  SIGTERM and SIGINT stop it after the pass in flight (exit 0); SIGHUP
reloads the mutable options (log level, interval).  The notification fast path
and the shared work queue come with the agent's own issue.
"""

import logging
import random
import signal
import sys
import threading

from oslo_config import cfg

from rp_reporter import conf as rp_conf
from rp_reporter import wiring

LOG = logging.getLogger("rp_reporter.agent")


def _setup_logging(conf):
    logging.basicConfig(stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger().setLevel(logging.DEBUG if conf.debug else logging.INFO)


class Agent:
    def __init__(self, conf):
        self.conf = conf
        self.reconciler = wiring.reconciler(conf)
        self.stopping = threading.Event()

    def stop(self, signum=None, frame=None):
        LOG.info("stopping (signal %s): finishing the pass in flight", signum)
        self.stopping.set()

    def reload(self, signum=None, frame=None):
        self.conf.mutate_config_files()
        _setup_logging(self.conf)
        LOG.info("reloaded mutable options: interval=%s", self.conf.reconcile.interval)

    def next_wait(self):
        interval, jitter = self.conf.reconcile.interval, self.conf.reconcile.jitter
        return interval * random.uniform(1 - jitter, 1 + jitter)

    def run_once(self):
        try:
            summary = self.reconciler.run()
        except Exception as e:  # an outage costs this pass, never the process
            LOG.error("reconcile pass failed: %s", e)
            return
        LOG.info("reconcile pass: %s", {k: v for k, v in summary.as_dict().items() if v})

    def run(self):
        LOG.info("agent %s starting: reconcile every %s s (no notification fast path yet)",
                 self.conf.host, self.conf.reconcile.interval)
        while not self.stopping.is_set():
            self.run_once()
            self.stopping.wait(self.next_wait())
        LOG.info("agent %s stopped", self.conf.host)
        return 0


def main(argv=None):
    try:
        conf = rp_conf.load(sys.argv[1:] if argv is None else argv)
        wiring.check(conf)
    except (cfg.Error, ValueError) as e:
        print(f"rp-reporter-agent: error: bad configuration: {e}", file=sys.stderr)
        return 2
    _setup_logging(conf)
    agent = Agent(conf)
    signal.signal(signal.SIGTERM, agent.stop)
    signal.signal(signal.SIGINT, agent.stop)
    signal.signal(signal.SIGHUP, agent.reload)
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
