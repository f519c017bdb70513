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

"""The transport of the shared listing: oslo.messaging RPC casts to one member.

Each agent serves topic ``rp_reporter_listing.<group>`` as server ``<host>`` on the
bus the agents use for Ironic's notifications (``conf.bus_url``); what travels and
who may send it is ``listing_bus``'s.
"""

import importlib

import oslo_messaging

from rp_reporter import conf as rp_conf

TOPIC = "rp_reporter_listing"
EXCHANGE = "rp_reporter"
# 2.0: one signed ``message`` per cast (listing_messages); 1.0's bare arguments are gone.
VERSION = "2.0"
NAMESPACE = "rp_reporter.listing"


# oslo.messaging 18's RPC client and server read these groups from the transport's
# configuration, but the library registers them on its global one only: on the agent's
# own ConfigOpts every cast failed ("no such option oslo_messaging_tracing").
GLOBAL_ONLY_GROUPS = {"oslo_messaging_metrics": "oslo_messaging._metrics.client",
                      "oslo_messaging_tracing": "oslo_messaging._tracing.client"}


def _register_global_only_opts(conf):
    for group, module in GLOBAL_ONLY_GROUPS.items():
        try:
            opts = getattr(importlib.import_module(module), group)
        except (ImportError, AttributeError):  # a release without it reads no such group
            continue
        conf.register_opts(opts, group=group)


class RpcBus:
    """Casts to one member, and serves this one: oslo.messaging RPC."""

    def __init__(self, conf):
        _register_global_only_opts(conf)
        self._transport = oslo_messaging.get_rpc_transport(conf, url=rp_conf.bus_url(conf))
        self._topic = f"{TOPIC}.{conf.coordination.group}"
        self._host = conf.host
        # retry=0: each cast is tried once (oslo.messaging's default, None, retries for
        # ever, which held the lister's pass through a broker outage).
        self._client = oslo_messaging.get_rpc_client(
            self._transport, oslo_messaging.Target(topic=self._topic, exchange=EXCHANGE,
                                                   namespace=NAMESPACE, version=VERSION),
            retry=0)
        self._server = None

    def serve(self, endpoint):
        target = oslo_messaging.Target(topic=self._topic, server=self._host, exchange=EXCHANGE)
        self._server = oslo_messaging.get_rpc_server(self._transport, target, [endpoint],
                                                     executor="threading")
        self._server.start()

    def cast(self, member, method, **kwargs):
        self._client.prepare(server=member).cast({}, method, **kwargs)

    def stop(self):
        """Stop receiving (returns once the server's poll has; ``wait`` then lets what
        was received finish)."""
        if self._server is not None:
            self._server.stop()

    def wait(self):
        if self._server is not None:
            self._server.wait()
