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

"""Glance, the nova-cloud profile's image service: its WSGI application under
gunicorn, the file store, behind Keystone; one tiny raw image (IMAGE_NAME) that
nova boots from (fake-hardware's deploy never downloads it)."""

import os
import shutil
import subprocess

from tools import clients
from tools.localstack import keystone
from tools.localstack import process

NAME = "glance"
CATALOG = ("image", "glance", "")
VENV_PACKAGES = ("glance",)  # at the release's version (releases.pins)
IMAGE_NAME = "rp-tiny-raw"

GLANCE_CONF = """\
[DEFAULT]
debug = False
workers = 1
enabled_backends = local:file
worker_self_reference_url = {url}
[glance_store]
default_backend = local
[local]
filesystem_store_datadir = {dir}/images
[os_glance_staging_store]
filesystem_store_datadir = {dir}/staging
[os_glance_tasks_store]
filesystem_store_datadir = {dir}/tasks
[database]
connection = {db}
[paste_deploy]
flavor = keystone
config_file = {dir}/glance-api-paste.ini
[oslo_concurrency]
lock_path = {dir}/locks
"""


def venv_ready():
    return os.path.exists(process.venv_bin("glance-manage"))


def start(stack):
    conf_dir = stack.service_dir(NAME)
    conf = os.path.join(conf_dir, "glance-api.conf")
    fresh = not os.path.exists(conf)
    if fresh:
        shutil.copy(os.path.join(process.stack_venv(), "etc", "glance", "glance-api-paste.ini"),
                    conf_dir)
        with open(conf, "w") as f:
            f.write(GLANCE_CONF.format(dir=conf_dir, url=stack.url(NAME),
                                       db=stack.database_url(NAME)))
            f.write(keystone.authtoken(stack, NAME))
        subprocess.run([process.venv_bin("glance-manage"), "--config-file", conf, "db_sync"],
                       check=True, capture_output=True)
    # Glance's application reads its files from OS_GLANCE_CONFIG_DIR and parses no argv.
    stack.services[NAME].spawn(
        [process.venv_bin("gunicorn"), *process.GUNICORN, "-w", "1", "--threads", "4",
         "-b", f"127.0.0.1:{stack.ports[NAME]}", "glance.wsgi.api:application"],
        {"OS_GLANCE_CONFIG_DIR": conf_dir})
    process.wait_until(lambda: process.http_ok(stack.url(NAME) + "/versions"), 90, "Glance")
    if fresh:
        upload_image(stack)
    process.log(f"glance on {stack.ports[NAME]}")


def upload_image(stack, name=IMAGE_NAME, properties=None):
    """A public 4 KiB raw image (uploaded as the bootstrap admin) with ``properties``
    (nova reads ``trait:<T>=required`` from them); its id."""
    http = clients.session({}, auth=stack.admin_auth("image"))
    image = clients.call(http, "POST", stack.url(NAME) + "/v2/images", (201,), json={
        "name": name, "disk_format": "raw", "container_format": "bare",
        "visibility": "public", **(properties or {})})
    clients.call(http, "PUT", f"{stack.url(NAME)}/v2/images/{image['id']}/file", (204,),
                 data=b"\0" * 4096, headers={"Content-Type": "application/octet-stream"})
    return image["id"]
