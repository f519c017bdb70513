"""rp_reporter's nova-compute driver, where nova's loader looks for drivers.

nova 34 loads ``[DEFAULT] compute_driver`` as ``nova.virt.<value>``
(``nova.virt.driver.load_compute_driver``), so a driver outside nova's tree is
found only under ``nova.virt``.  rp_reporter installs this one module there (it
ships no other part of nova's namespace), and nova-compute, started by its own
command with its own nova.conf, loads the driver with:

    [DEFAULT]
    compute_driver = rp_reporter.IronicDriver

The driver itself lives in ``rp_reporter.nova_compute``.
"""

from rp_reporter.nova_compute import IronicDriver

__all__ = ["IronicDriver"]
