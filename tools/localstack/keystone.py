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

"""Keystone, the production profile's identity service: fernet tokens under
gunicorn, the catalog of Placement and Ironic, their service users, and the
identities tests use (IDENTITIES).  Placement and Ironic then sit behind
``[keystone_authtoken]`` (authtoken) with their release policy defaults."""

import os
import subprocess

from tools import clients
from tools.localstack import process

NAME = "keystone"
VENV_PACKAGES = ("keystone",)  # at the release's version (releases.pins)
REGION = "RegionOne"
# Token lifetime, seconds: short, so a test can see a token expire under a running
# agent, yet over 120: keystoneauth renews a token with under 120 s left, so at 120
# or less every request re-authenticates (keystonemiddleware then fetches several
# tokens per validation, each a bcrypt check).  Clients renew after 60 s.
TOKEN_EXPIRATION = 180
# Under a whole nova (the nova-cloud profile) tokens live as long as Keystone's default:
# the scheduling race measures how soon a freed node is offered, and at 180 s every
# client renewed its token every 60 s, at its first request after the mark.  An agent
# idle between notifications paid it on the fast path: a password check (seen: 0.9 s)
# and then, for each of its requests with the new token, Ironic's validation of it
# with Keystone (seen: 1.1-2.4 s, eight at once); freed-node reuse p50 2.5 s in A and
# 2.8 s in C where it is 0.2-0.3 s without.
CLOUD_TOKEN_EXPIRATION = 3600
ADMIN_PASSWORD = "rp-admin-secret"
# The identities tests use (domain Default): name -> (scope, role).  "system"
# means system_scope=all; otherwise the project, "service".
IDENTITIES = {
    "rp-system-reader": ("system", "reader"),   # the right Ironic credentials for the reporter
    "rp-system-member": ("system", "member"),   # Ironic writes (resource-class set)
    "rp-service": ("service", "service"),       # right for Placement, wrong for Ironic
    "rp-admin": ("service", "admin"),
    "rp-reader": ("service", "reader"),
}
# A service module's CATALOG is (service type, name, path under its root) and its
# NAME is its user for [keystone_authtoken] (role service in project service);
# EXTRA_ROLES adds other grants to that user ((scope, role), as in IDENTITIES).

KEYSTONE_CONF = """\
[DEFAULT]
debug = False
[database]
connection = {db}
[token]
provider = fernet
expiration = {expiration}
[fernet_tokens]
key_repository = {dir}/fernet-keys
[fernet_receipts]
key_repository = {dir}/fernet-keys
[credential]
key_repository = {dir}/credential-keys
"""


def token_expiration(stack):
    """The token lifetime Keystone issues in this stack's shape."""
    return CLOUD_TOKEN_EXPIRATION if stack.nova == "cloud" else TOKEN_EXPIRATION


def venv_ready():
    return os.path.exists(process.venv_bin("keystone-manage"))


def password(user):
    return f"{user}-secret"


def authtoken(stack, user):
    """The [keystone_authtoken] section of a service behind Keystone, as text."""
    return process.ini({"keystone_authtoken": authtoken_options(stack, user)})


def authtoken_options(stack, user):
    """The options of a service's [keystone_authtoken] section (its user, project service)."""
    return {"www_authenticate_uri": stack.keystone_url + "/v3",
            "auth_url": stack.keystone_url + "/v3", "auth_type": "password",
            "username": user, "password": password(user), "user_domain_name": "Default",
            "project_name": "service", "project_domain_name": "Default",
            "region_name": REGION}


def credentials(stack, name, scope=None):
    """keystoneauth options for an [ironic] or [placement] section, as identity ``name``
    (one of IDENTITIES, or a service's user with ``scope``: "system" or "service")
    would use them; endpoints come from the catalog."""
    scope = scope or IDENTITIES[name][0]
    creds = {"auth_type": "password", "auth_url": stack.keystone_url + "/v3",
             "username": name, "password": password(name), "user_domain_name": "Default",
             "region_name": REGION, "valid_interfaces": "internal,public"}
    if scope == "system":
        creds["system_scope"] = "all"
    else:
        creds.update(project_name=scope, project_domain_name="Default")
    return creds


def tenant(stack, name, role="member", user=None):
    """Project ``name`` and a user (``user``, by default of the project's name) with
    ``role`` in it, made once: (the project's id, a refreshing token of that user
    scoped to it)."""
    user_name = user or name
    http = clients.session({}, auth=admin_token(stack, {"system": {"all": True}}))
    api = stack.keystone_url + "/v3"

    def one(kind, body):
        found = clients.call(http, "GET", f"{api}/{kind}s?name={body['name']}", (200,))
        if found[f"{kind}s"]:
            return found[f"{kind}s"][0]["id"]
        return clients.call(http, "POST", f"{api}/{kind}s", (201,), json={kind: body})[kind]["id"]

    project = one("project", {"name": name, "domain_id": "default"})
    user = one("user", {"name": user_name, "password": password(user_name),
                        "domain_id": "default"})
    roles = {r["name"]: r["id"] for r in clients.call(http, "GET", api + "/roles", (200,))["roles"]}
    clients.call(http, "PUT", f"{api}/projects/{project}/users/{user}/roles/{roles[role]}",
                 (204,))
    return project, clients.KeystoneToken(api, user_name, password(user_name),
                                          {"project": {"id": project}})


def admin_token(stack, scope):
    """A refreshing token of the bootstrap admin in ``scope`` (for the clients' requests)."""
    return clients.KeystoneToken(stack.keystone_url + "/v3", "admin", ADMIN_PASSWORD, scope)


def start(stack):
    """Keystone under gunicorn; on first start also its database, keys, bootstrap, the
    catalogued services' endpoints and users, and IDENTITIES."""
    conf_dir = stack.service_dir(NAME)
    conf = os.path.join(conf_dir, "keystone.conf")
    fresh = not os.path.exists(conf)
    if fresh:
        with open(conf, "w") as f:
            f.write(KEYSTONE_CONF.format(dir=conf_dir, db=stack.database_url(NAME),
                                         expiration=token_expiration(stack)))
        manage = [process.venv_bin("keystone-manage"), "--config-file", conf]
        for step in (["db_sync"],
                     ["fernet_setup", "--keystone-user", "root", "--keystone-group", "root"],
                     ["credential_setup", "--keystone-user", "root",
                      "--keystone-group", "root"],
                     ["bootstrap", "--bootstrap-password", ADMIN_PASSWORD,
                      "--bootstrap-region-id", REGION,
                      *(arg for iface in ("admin", "internal", "public")
                        for arg in (f"--bootstrap-{iface}-url", stack.keystone_url + "/v3"))]):
            subprocess.run(manage + step, check=True, capture_output=True)
    process.serve_wsgi(stack.services[NAME], stack.ports[NAME], process.venv_bin("gunicorn"),
                       "keystone.wsgi.api:application", conf_dir,
                       {"OS_KEYSTONE_CONFIG_FILES": conf}, ("-w", "2", "--threads", "2"))
    process.wait_until(lambda: process.http_ok(stack.keystone_url + "/v3"), 60, "Keystone")
    if fresh:
        register(stack)
    process.log(f"keystone on {stack.ports[NAME]}")


def register(stack):
    """Every catalogued service of the stack (public and internal endpoints, RegionOne),
    the service users and the test identities, through Keystone's API as the bootstrap
    admin (system scope)."""
    http = clients.session({}, auth=admin_token(stack, {"system": {"all": True}}))
    api = stack.keystone_url + "/v3"

    def post(path, kind, body):
        return clients.call(http, "POST", api + path, (201,), json={kind: body})[kind]

    roles = {r["name"]: r["id"]
             for r in clients.call(http, "GET", api + "/roles", (200,))["roles"]}
    if "service" not in roles:
        roles["service"] = post("/roles", "role", {"name": "service"})["id"]
    project = post("/projects", "project", {"name": "service", "domain_id": "default"})["id"]
    users = {name: [(scope, role)] for name, (scope, role) in IDENTITIES.items()}
    for module in stack.catalogued():
        service_type, name, path = module.CATALOG
        service = post("/services", "service", {"type": service_type, "name": name})["id"]
        for interface in ("public", "internal"):
            post("/endpoints", "endpoint", {"service_id": service, "interface": interface,
                                            "url": stack.url(module.NAME) + path,
                                            "region_id": REGION})
        users[module.NAME] = [("service", "service"), *getattr(module, "EXTRA_ROLES", ())]
    for name, grants in users.items():
        user = post("/users", "user", {"name": name, "password": password(name),
                                       "domain_id": "default"})["id"]
        for scope, role in grants:
            target = "/system" if scope == "system" else f"/projects/{project}"
            clients.call(http, "PUT", f"{api}{target}/users/{user}/roles/{roles[role]}", (204,))
