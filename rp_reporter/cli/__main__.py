"""``python -m rp_reporter.cli``: the same as the ``rp-reporter`` console script."""

import sys

from rp_reporter.cli.app import main

sys.exit(main())
