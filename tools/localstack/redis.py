"""Redis, the embedded profile's coordination backend (the agents' hash ring)."""

from tools.localstack import process

NAME = "redis"
DEBS = (("redis-server", "/usr/bin/redis-server"),)


def start(stack):
    port = stack.ports[NAME]
    stack.services[NAME].spawn([
        "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--dir", stack.service_dir(NAME)])
    process.wait_until(lambda: process.port_open(port), 30, "Redis")
    process.log(f"redis on {port}")
