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

"""An Ironic whose API stops below 1.82 (no shard field): the reporter asks only
for the fields the negotiated version has, and says in one line what an option
needs when the version is too old for it.  Real Ironic behind a proxy that caps
the version it announces, so the 406 for a field it lacks is Ironic's own."""

import pytest
from keystoneauth1 import adapter as ksa_adapter
from keystoneauth1 import session as ksa_session

from rp_reporter import errors
from rp_reporter.sync import ironic as ironic_sync
from tests.functional.proxy import Proxy

pytestmark = pytest.mark.functional


@pytest.fixture
def capped_ironic(stack):
    proxies = []

    def capped(version):
        proxy = Proxy(stack.ironic_url)
        proxy.headers["X-OpenStack-Ironic-API-Maximum-Version"] = version
        proxies.append(proxy)
        return proxy
    yield capped
    for proxy in proxies:
        proxy.close()


def client(url, **scope):
    adapter = ksa_adapter.Adapter(ksa_session.Session(), service_type="baremetal",
                                  endpoint_override=url)
    return ironic_sync.IronicClient.from_adapter(adapter, **scope)


def test_below_1_82_the_listing_leaves_out_the_shard_field(capped_ironic, ironic, shard):
    node = ironic.create(resource_class="baremetal-gold")
    ironic.set_maintenance(node, True)
    proxy = capped_ironic("1.81")
    reader = client(proxy.url)
    records = {r["uuid"]: r for r in reader.iter_nodes()}
    assert reader.api_version == (1, 81)
    assert records[node]["maintenance"] is True and "shard" not in records[node]
    assert reader.get_node(node)["resource_class"] == "baremetal-gold"
    asked = [p for _, m, p in proxy.seen if "fields=" in p]
    assert asked and not any("shard" in p for p in asked)


def test_an_option_the_version_lacks_is_one_clear_line(capped_ironic, shard):
    reader = client(capped_ironic("1.81").url, shard=shard)
    with pytest.raises(errors.ServiceError) as e:
        reader.list_nodes()
    assert e.value.kind == errors.MISCONFIGURED
    assert str(e.value) == ("[ironic] Ironic's API goes up to 1.81; [ironic] shard needs 1.82 "
                            "or later")


def test_an_ironic_below_the_floor_is_refused_by_name(capped_ironic):
    reader = client(capped_ironic("1.45").url)
    with pytest.raises(errors.ServiceError, match=r"goes up to 1.45; rp_reporter .* needs 1.46"):
        reader.list_nodes()
