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
