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

"""Redis, the embedded profile's coordination backend (the agents' hash ring)."""

from tools.localstack import process

NAME = "redis"


def start(stack):
    port = stack.ports[NAME]
    stack.services[NAME].spawn([
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", stack.service_dir(NAME)])
    process.wait_until(lambda: process.port_open(port), 30, "Redis")
    process.log(f"redis on {port}")


def flush(stack):
    """Delete every key (the backend losing its data: members, locks, all), as a restart
    without persistence does; returns how many were deleted."""
    import redis as redis_client  # the stack's client (tooz's redis driver brings it)

    client = redis_client.Redis(host="127.0.0.1", port=stack.ports[NAME], socket_timeout=5)
    try:
        deleted = client.dbsize()
        client.flushall()
        return deleted
    finally:
        client.close()
