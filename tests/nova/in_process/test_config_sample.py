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

"""The driver's nova.conf options have a current generated sample (needs nova, hence here)."""

import os

from oslo_config import generator

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
ETC = os.path.join(ROOT, "etc", "rp_reporter")


def test_driver_sample_config_is_current(tmp_path):
    """Fails when a driver option changed and `tox -e genconfig` was not run."""
    out = tmp_path / "sample.conf"
    generator.main(["--config-file", os.path.join(ETC, "nova-config-generator.conf"),
                    "--output-file", str(out)])
    with open(os.path.join(ETC, "nova.conf.rp_reporter.sample")) as committed:
        assert out.read_text() == committed.read(), "run: tox -e genconfig"
