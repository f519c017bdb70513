import sys

from rp_reporter.agent.cmd import main

sys.exit(main())
