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

"""One log line when a dependency goes, one when it is back, whatever raises."""

import logging

from rp_reporter import errors
from rp_reporter.outage import Outage


def lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "rp_reporter"]


def test_an_error_without_a_kind_is_one_line_however_often_it_repeats(caplog):
    outage = Outage("coordination backend")
    with caplog.at_level(logging.WARNING, logger="rp_reporter"):
        for i in range(50):  # a backend client's own exception, e.g. READONLY
            outage.failed(RuntimeError(f"READONLY ({i})"), "membership not renewed")
        outage.ok()
    assert lines(caplog)[0] == "coordination backend membership not renewed: READONLY (0)"
    assert len(lines(caplog)) == 2 and "available again" in lines(caplog)[1]


def test_a_new_kind_of_failure_is_a_new_line(caplog):
    outage = Outage("Ironic")
    with caplog.at_level(logging.WARNING, logger="rp_reporter"):
        outage.failed(errors.ServiceError("ironic", errors.UNAVAILABLE, "down"))
        outage.failed(RuntimeError("still down"))  # no kind: an outage, as before
        outage.failed(errors.ServiceError("ironic", errors.DENIED, "403"))
    assert len(lines(caplog)) == 2 and "permission" in lines(caplog)[1]
