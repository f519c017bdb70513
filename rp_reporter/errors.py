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

"""What went wrong calling Ironic or Placement, in one line that names the
configuration section and says what to do.

Three kinds matter, because each wants a different answer:

* UNAVAILABLE: the service (or Keystone) cannot be reached or answers 5xx.
  An outage: retry until it returns.
* DENIED: 403.  A permission problem no retry fixes: grant a role or scope.
* MISCONFIGURED: Keystone refused the credentials (401), the catalog has no
  such endpoint, or the options cannot work.  Fix the configuration.

The CLI exits 2 for the last two (bad configuration, nothing written) and 1
for an outage; the agent survives all three, says which in ``/healthz``, and
recovers by itself once the cause is gone.
"""

from keystoneauth1 import exceptions as ksa_exc

UNAVAILABLE, DENIED, MISCONFIGURED = "unavailable", "denied", "misconfigured"
FAILED = "failed"  # any other refusal of one request (a 400, a 409): that call only

SERVICE_NAMES = {"ironic": "Ironic", "placement": "Placement", "nova": "nova"}

# What each section's user needs (the least grants, shown on the project's Keystone
# stack by tests/keystone; doc/source/install/requirements.md, "Behind Keystone").
GRANTS = {
    "placement": "give the [placement] user the service role in its project (as nova's "
                 "Placement user has); admin alone loses the bulk path, reader and member "
                 "cannot list providers",
    "ironic": "give the [ironic] user a system-scoped reader role and set [ironic] "
              "system_scope = all (or the service role in its project with Ironic's "
              "rbac_service_role_elevated_access = True); resource-class set/unset and "
              "traits from-capabilities also need system member",
}


class Fenced(Exception):
    """This agent may not write now: its membership lapsed, or the node is no longer
    its own.  Raised before a write is sent, never after (nothing to undo)."""


class ServiceError(Exception):
    """A failed call to one service: ``section``, ``kind`` and a one-line message."""

    def __init__(self, section, kind, message):
        self.section, self.kind = section, kind
        # One line, whatever the server put in its detail (blank lines, indentation).
        super().__init__(f"[{section}] " + " ".join(str(message).split()))

    @property
    def retryable(self):
        return self.kind == UNAVAILABLE

    @property
    def service(self):
        return SERVICE_NAMES.get(self.section, self.section)


def denied_hint(section, system_scoped=None):
    """What to grant after a 403, with a word on the token's scope where it is the cause."""
    hint = GRANTS.get(section, "grant the user the role this call needs")
    if section == "placement" and system_scoped:
        hint = ("the token is system-scoped, and Placement's service role is a project "
                "role: set project_name (and project_domain_name) in [placement] instead of "
                "system_scope; " + hint)
    return hint


def from_keystone(section, exc):
    """A keystoneauth1 exception raised while authenticating or finding the endpoint
    (never an HTTP answer of the service itself) as a ServiceError."""
    service_type = {"ironic": "baremetal", "nova": "compute"}.get(section, section)
    if isinstance(exc, (ksa_exc.EndpointNotFound, ksa_exc.CatalogException)):
        return ServiceError(section, MISCONFIGURED,
                            f"no {service_type} endpoint in the service catalog ({exc}): check "
                            f"region_name, valid_interfaces and service_type")
    if isinstance(exc, ksa_exc.Unauthorized):
        return ServiceError(section, MISCONFIGURED,
                            f"Keystone refused the credentials ({exc}): check username, "
                            f"password, the domains and the project or system scope")
    if isinstance(exc, ksa_exc.Forbidden):
        return ServiceError(section, DENIED, f"Keystone refused the scope asked for ({exc})")
    if isinstance(exc, (ksa_exc.ConnectionError, ksa_exc.RetriableConnectionFailure)):
        return ServiceError(section, UNAVAILABLE, f"unreachable: {exc}")
    if isinstance(exc, (ksa_exc.MissingAuthPlugin, ksa_exc.AuthPluginException,
                        ksa_exc.DiscoveryFailure, ksa_exc.MissingRequiredOptions)):
        return ServiceError(section, MISCONFIGURED, f"{type(exc).__name__}: {exc}")
    if isinstance(exc, ksa_exc.HttpError) and exc.http_status and exc.http_status >= 500:
        return ServiceError(section, UNAVAILABLE, f"Keystone: {exc}")
    return ServiceError(section, MISCONFIGURED, f"{type(exc).__name__}: {exc}")


def system_scoped(adapter):
    """Whether the adapter's token is system-scoped (None when it cannot be told)."""
    try:
        access = access_info(adapter)
    except ksa_exc.ClientException:
        return None
    return None if access is None else bool(access.system_scoped)


def access_info(adapter):
    """The Keystone token's AccessInfo behind an adapter, or None when the adapter
    uses no Keystone identity (``none``, ``admin_token``).  Raises keystoneauth1's
    exceptions when Keystone cannot give a token."""
    from keystoneauth1.identity import base as identity_base

    auth = adapter.auth or adapter.session.auth
    if not isinstance(auth, identity_base.BaseIdentityPlugin):
        return None
    return auth.get_access(adapter.session)
