"""rp_reporter: keeps Placement's picture of Ironic's bare-metal nodes right and fresh."""

import warnings


def quiet_eventlet_warning():
    """oslo.messaging and tooz import eventlet (through futurist and oslo.service), which
    warns on import; rp_reporter uses threads only, so operators need not read it."""
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
