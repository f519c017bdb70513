"""The daemon that keeps Placement fresh (``rp-reporter-agent``).

* ``cmd``: the command line: configuration, logging, signals;
* ``controller``: notifications and the periodic resync name nodes, one work
  queue syncs them (``sync/node.py``);
* ``ownership``: membership, the ring, fencing, and the guards before writes;
* ``health``: what /healthz says, and the threads kept alive;
* ``rules``: the trait rules, loaded and reloaded.
"""

from rp_reporter.agent.cmd import main
from rp_reporter.agent.controller import Agent
from rp_reporter.agent.rules import load_rules

__all__ = ["Agent", "load_rules", "main"]
