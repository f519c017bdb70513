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

"""The rule of a deployed node that nothing owns (``orphans``)."""

import datetime

from rp_reporter import orphans

NOW = datetime.datetime(2026, 12, 6, 12, 0, 0)


def test_a_node_whose_server_nova_deleted_past_the_grace_is_orphaned():
    long_ago = NOW - datetime.timedelta(hours=2)
    just_now = NOW - datetime.timedelta(minutes=5)
    associated = {"n1": "deleted-long-ago", "n2": "deleted-just-now", "n3": "alive",
                  "n4": "unknown-to-nova"}
    instances = {"deleted-long-ago": long_ago, "deleted-just-now": just_now, "alive": None}
    assert orphans.orphaned(associated, instances, NOW, grace=3600) == [
        ("n1", "deleted-long-ago", long_ago)]
    # a zone-aware time (nova's objects give UTC datetimes with a tzinfo)
    aware = NOW.replace(tzinfo=datetime.timezone.utc)
    assert orphans.orphaned(associated, instances, aware, grace=60) == [
        ("n1", "deleted-long-ago", long_ago), ("n2", "deleted-just-now", just_now)]
    assert orphans.orphaned({}, instances, NOW, grace=0) == []
