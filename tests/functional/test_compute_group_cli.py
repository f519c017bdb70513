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
"""``rp-reporter compute-group show|forget|hold|release`` through its console entry, on the group's
record in the stack's Redis as nova-compute services of the driver write it."""

import time
import uuid

import pytest

from rp_reporter import group_record
from rp_reporter import membership
from tests.functional.conftest import run_json

pytestmark = pytest.mark.functional


@pytest.fixture
def compute_group(stack):
    """A compute group with a live member (compute-1) that forced compute-2 down, as
    the driver records them; compute-2 is no live member."""
    name = f"nova-{uuid.uuid4().hex[:8]}"
    live = membership.Group(stack.redis_url, name, "compute-1").start()
    record = group_record.GroupRecord(name, live.durable)
    for host in ("compute-1", "compute-2"):
        record.join(host)
    record.forced_down("compute-2", "compute-1")
    record.queue("compute-2", "node-1", {"server-1", "server-2"})
    yield name, record
    live.stop()


def test_show_and_forget_a_compute_groups_record(stack, cli, write_conf, compute_group):
    name, record = compute_group
    conf = write_conf(coordination={"backend_url": stack.redis_url})
    code, rows, err = run_json(cli, "compute-group", "show", name, config_file=conf)
    assert code == 0, err
    assert rows == [{"host": "compute-1", "live": True, "forced_down_by": "",
                     "held_until": "", "queued_builds": 0},
                    {"host": "compute-2", "live": False, "forced_down_by": "compute-1",
                     "held_until": "", "queued_builds": 2}]
    code, out, err = cli("compute-group", "forget", name, "compute-2", config_file=conf)
    assert code == 0 and "compute-2 removed" in out, err
    assert record.members() == {"compute-1"} and record.movers() == {}
    # Misuse: a host not in the record, no backend configured: one line, exit 2.
    code, out, err = cli("compute-group", "forget", name, "compute-9", config_file=conf)
    assert code == 2 and "compute-9 is not in group" in err and record.members() == {
        "compute-1"}
    code, out, err = cli("compute-group", "show", name, config_file=write_conf("alone"))
    assert code == 2 and "[coordination] backend_url is not set" in err


def test_hold_and_release_a_service_down_for_an_upgrade(stack, cli, write_conf,
                                                         compute_group):
    """A hold is recorded with its bound (shown), refused without one in range or for a
    host not in the record, and ended by release."""
    name, record = compute_group
    conf = write_conf(coordination={"backend_url": stack.redis_url})
    before = time.time()
    code, out, err = cli("compute-group", "hold", name, "compute-1", "--minutes", "10",
                         config_file=conf)
    assert code == 0 and "compute-1 held in group" in out, err
    assert before + 600 - 1 <= record.holds()["compute-1"] <= time.time() + 600
    code, rows, err = run_json(cli, "compute-group", "show", name, config_file=conf)
    assert code == 0 and rows[0]["held_until"].startswith(
        time.strftime("%Y-%m-%dT", time.gmtime(before + 600))), (rows, err)
    for misuse, says in ((["compute-1", "--minutes", "0"], "a hold has a bound"),
                         (["compute-1", "--minutes", "1441"], "a hold has a bound"),
                         (["compute-9"], "compute-9 is not in group")):
        code, out, err = cli("compute-group", "hold", name, *misuse, config_file=conf)
        assert code == 2 and says in err, (misuse, out, err)
    assert set(record.holds()) == {"compute-1"}
    code, out, err = cli("compute-group", "release", name, "compute-1", config_file=conf)
    assert code == 0 and "hold in group" in out and record.holds() == {}, err
