"""rp_reporter: keeps Placement's picture of Ironic's bare-metal nodes right and fresh."""

import warnings

# tooz and oslo.messaging import eventlet (through futurist and oslo.service),
# which prints a deprecation notice on import.  rp_reporter runs threads only,
# so operators need not read it on every command.  Only that message is muted.
warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
