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

"""rp_reporter's nova-compute driver, where nova's loader looks for drivers.

nova (31 to 34) loads ``[DEFAULT] compute_driver`` as ``nova.virt.<value>``
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
