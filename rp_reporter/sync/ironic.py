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

"""Ironic: the paginated node listing and the single-node read, via python-ironicclient.

Every failure leaves here as an ``errors.ServiceError`` naming ``[ironic]``
(a 404 on a single read is the one answer returned, as None).  The client
is built on first use, so an agent starts and serves ``/healthz`` whatever
Keystone or the catalog say, and recovers once they answer.
"""

import concurrent.futures
import functools
import logging
import threading

from ironicclient import client as ironic_client
from ironicclient.common.apiclient import exceptions as ironic_exc
from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import errors
from rp_reporter import traits as capabilities

LOG = logging.getLogger(__name__)

# Only what the model reads; the client negotiates the API version, and a field
# that version lacks is not asked for (Ironic answers 406 for it), so it reads
# as unset.
NODE_FIELDS = ("uuid", "name", "resource_class", "provision_state", "power_state", "maintenance",
               "instance_uuid", "traits", "conductor_group", "shard")
# The API version that added each field, where it is later than the floor.
FIELD_VERSIONS = {"conductor_group": (1, 46), "owner": (1, 50), "lessee": (1, 65),
                  "shard": (1, 82)}
# The oldest Ironic API this reporter uses: the floor of nova 34's Ironic driver,
# which also has node traits (1.37) and resource_class in fields= (1.21).
MIN_API_VERSION = (1, 46)
# What the capability traits read beside NODE_FIELDS.
TRAIT_FIELDS = ("properties", "extra")
# What shows a project-scoped listing to be complete (owner 1.50, lessee 1.65).
OWNER_FIELDS = ("owner", "lessee")


# Ironic's own limit on a node's resource_class (a String(80) column).
RESOURCE_CLASS_MAX = 80


# Of a node's driver_internal_info (tenancy's), the one key the model reads: the
# rest (cached clean steps, agent URLs) can be kilobytes a node, at every pass.
INTERNAL_KEPT = ("automatic_lessee",)


def _record(node, fields=NODE_FIELDS):
    # The node's own parsed JSON, not to_dict(): that deep-copies every node,
    # on every pass, for a Node object dropped the moment its fields are taken.
    data = node._info
    record = {field: data.get(field) for field in fields}
    internal = record.get("driver_internal_info")
    if isinstance(internal, dict):
        record["driver_internal_info"] = {k: internal[k] for k in INTERNAL_KEPT if k in internal}
    return record


def _translated(call):
    """Ironic's and Keystone's exceptions as ServiceErrors naming [ironic]; 404 passes."""
    @functools.wraps(call)
    def wrapper(*args, **kwargs):
        try:
            return call(*args, **kwargs)
        except ironic_exc.NotFound:
            raise
        except ironic_exc.Forbidden as e:
            raise errors.ServiceError("ironic", errors.DENIED,
                                      f"Ironic: {e}: {errors.denied_hint('ironic')}") from None
        except ironic_exc.Unauthorized as e:
            raise errors.ServiceError("ironic", errors.MISCONFIGURED,
                                      f"Ironic does not take the token: {e}") from None
        except (ironic_exc.HttpServerError, ironic_exc.ConnectionError) as e:
            raise errors.ServiceError("ironic", errors.UNAVAILABLE, f"Ironic: {e}") from None
        except ironic_exc.EndpointException as e:
            raise errors.ServiceError("ironic", errors.MISCONFIGURED,
                                      f"no baremetal endpoint: {e}") from None
        except ironic_exc.ClientException as e:
            raise errors.ServiceError("ironic", errors.FAILED, f"Ironic: {e}") from None
        except ksa_exc.ClientException as e:
            raise errors.from_keystone("ironic", e) from None
    return wrapper


class IronicClient:
    """Reads the nodes this reporter is responsible for."""

    def __init__(self, client=None, conductor_group=None, shard=None, page_size=1000,
                 adapter=None, write_guard=None):
        self._built = client
        self._adapter = adapter
        self._build_lock = threading.Lock()
        self.conductor_group = conductor_group
        self.shard = shard
        self.page_size = page_size
        # Called before every node write (derived traits): see PlacementClient.write_guard.
        self.write_guard = write_guard or (lambda: None)
        # After a full listing: None when it is shown to hold every node in scope,
        # else why it cannot be (see ``_listing_gap``).
        self.listing_gap = "no listing made yet"
        self.api_version = None  # negotiated with Ironic on first use, as (major, minor)

    @classmethod
    def from_adapter(cls, adapter, **kwargs):
        return cls(adapter=adapter, **kwargs)

    @property
    def _client(self):
        """python-ironicclient, built on first use (it resolves the endpoint, which
        needs Keystone); a failed build is tried again on the next call."""
        with self._build_lock:
            if self._built is None:
                adapter = self._adapter
                endpoint = adapter.get_endpoint()
                if endpoint is None:  # keystoneauth says so with None, not an exception
                    raise ksa_exc.EndpointNotFound(
                        f"{adapter.interface} endpoint for {adapter.service_type} service "
                        f"in {adapter.region_name or 'any'} region not found")
                client = ironic_client.Client(
                    "1", endpoint_override=endpoint, session=adapter.session,
                    os_ironic_api_version="latest", interface=adapter.interface)
                client.negotiate_api_version()
                self.api_version = self._checked_version(client.current_api_version)
                self._built = client
            return self._built

    def _checked_version(self, negotiated):
        """The negotiated version as (major, minor); one too old for this reporter,
        or for the options set, is a configuration error naming what is needed."""
        version = tuple(int(p) for p in str(negotiated).split("."))
        needs = [(MIN_API_VERSION, "rp_reporter (as nova 34's Ironic driver)")]
        if self.conductor_group is not None:
            needs.append((FIELD_VERSIONS["conductor_group"], "[ironic] conductor_group"))
        if self.shard is not None:
            needs.append((FIELD_VERSIONS["shard"], "[ironic] shard"))
        for needed, who in needs:
            if version < needed:
                raise errors.ServiceError(
                    "ironic", errors.MISCONFIGURED,
                    f"Ironic's API goes up to {negotiated}; {who} needs "
                    f"{needed[0]}.{needed[1]} or later")
        return version

    @_translated
    def _available(self, fields):
        """The fields the negotiated API version has."""
        self._client  # noqa: B018 - built, and the version negotiated, on first use
        return tuple(f for f in fields if FIELD_VERSIONS.get(f, MIN_API_VERSION) <=
                     (self.api_version or MIN_API_VERSION))

    @property
    def adapter(self):
        return self._adapter

    @_translated
    def _token_project(self):
        """(scope, project_id) of the Ironic token: scope is "none" (no Keystone),
        "system", "project" or "other"."""
        access = errors.access_info(self._adapter) if self._adapter else None
        if access is None:
            return "none", None
        if access.system_scoped:
            return "system", None
        if access.project_scoped:
            return "project", access.project_id
        return "other", None

    def scope_note(self):
        """Why this token may not see a node that exists, or None when it sees all."""
        return self._listing_gap(*self._token_project(), beyond_project=False)

    @staticmethod
    def _listing_gap(scope, project, beyond_project):
        """Why a listing made with this token may lack nodes that exist, or None.

        Ironic without Keystone shows every node; a system-scoped reader sees
        every node; a project-scoped user sees only the nodes its project owns or
        leases, unless Ironic elevates the service role, which only a node outside
        the project in the listing itself can show.
        """
        if scope in ("none", "system") or beyond_project:
            return None
        if scope == "project":
            return (f"the [ironic] credentials are scoped to project {project}, and Ironic "
                    f"showed no node outside it: a project-scoped user sees only the nodes "
                    f"its project owns or leases; {errors.GRANTS['ironic']}")
        return "the [ironic] token is neither system- nor project-scoped"

    def _scope(self):
        scope = {}
        if self.conductor_group is not None:
            scope["conductor_group"] = self.conductor_group
        if self.shard is not None:
            scope["shards"] = [self.shard]
        return scope

    def in_scope(self, record):
        """Whether a node record belongs to this reporter's conductor group and shard."""
        return ((self.conductor_group is None
                 or (record.get("conductor_group") or "") == self.conductor_group.lower())
                and (self.shard is None or record.get("shard") == self.shard))

    def iter_nodes(self, extra_fields=()):
        """Every node in scope, as API records (dicts), a page at a time: a
        caller that keeps only what it needs never holds the whole listing.

        Once it is used up, ``listing_gap`` says whether it is shown complete.
        """
        self.listing_gap = "the listing did not finish"
        scope, project = self._token_project()
        fields = NODE_FIELDS + tuple(extra_fields)
        if scope == "project":
            fields += OWNER_FIELDS
        fields = self._available(tuple(dict.fromkeys(fields)))  # once each
        # Without owner and lessee no listing can show a node outside the project.
        can_see_beyond = set(OWNER_FIELDS) <= set(fields)
        beyond_project = False
        # The next page is asked for as soon as this one is here, so Ironic serves it
        # while the caller works on this one: one after the other, Ironic's single API
        # worker sat idle during the caller's work on every page (at 10^5 nodes, about
        # 70% of a core over a pass against 90% for a bare listing).
        reader = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ironic-pages")
        try:
            page = self._list_page(fields, None)
            while True:
                upcoming = (reader.submit(self._list_page, fields, page[-1].uuid)
                            if len(page) >= self.page_size else None)
                for node in page:
                    record = _record(node, fields)
                    if scope == "project" and can_see_beyond and not beyond_project:
                        beyond_project = project not in (record.get("owner"),
                                                         record.get("lessee"))
                    yield record
                if upcoming is None:
                    break
                page = upcoming.result()
        finally:  # also when the caller stops early: an asked page is not waited for
            reader.shutdown(wait=False, cancel_futures=True)
        self.listing_gap = self._listing_gap(scope, project, beyond_project)

    @_translated
    def _list_page(self, fields, marker):
        return self._client.node.list(fields=list(fields), limit=self.page_size, marker=marker,
                                      **self._scope())

    def list_nodes(self, extra_fields=()):
        return list(self.iter_nodes(extra_fields))

    @_translated
    def probe(self):
        """One node of the scope's listing, uuid only: these credentials still list."""
        self._client.node.list(fields=["uuid"], limit=1, **self._scope())

    @_translated
    def list_all_uuids(self):
        """Every node uuid in Ironic, whatever the scope (to tell moved from gone)."""
        nodes = self._client.node.list(fields=["uuid"], limit=0)
        return {n.uuid for n in nodes}

    @_translated
    def get_node(self, ident, extra_fields=()):
        """One node's record (by uuid or name), or None when Ironic answers 404."""
        fields = self._available(NODE_FIELDS + tuple(extra_fields))
        try:
            return _record(self._client.node.get(ident, fields=list(fields)), fields)
        except ironic_exc.NotFound:
            return None

    @_translated
    def add_trait(self, uuid, trait):
        """Add one trait to a node (``PUT /v1/nodes/{n}/traits/{t}``: the node's other
        traits, and a concurrent edit of them, are left alone)."""
        self.write_guard()
        try:
            self._client.node.add_trait(uuid, trait)
        except ironic_exc.NotFound:
            raise errors.ServiceError("ironic", errors.FAILED,
                                      f"Ironic: node {uuid} not found") from None

    @_translated
    def remove_trait(self, uuid, trait):
        """Remove one trait from a node (``DELETE /v1/nodes/{n}/traits/{t}``); False when
        the node no longer has it (or is gone), True when removed."""
        self.write_guard()
        try:
            self._client.node.remove_trait(uuid, trait)
        except ironic_exc.NotFound:
            return False
        return True

    @_translated
    def record_derived_traits(self, uuid, traits):
        """Write the sorted list of traits rp_reporter derived and added into the node's
        ``extra/rp_reporter_derived_traits`` (one JSON PATCH of that key alone)."""
        self.write_guard()
        path = "/extra/" + capabilities.RECORD_KEY
        try:
            self._client.node.update(uuid, [{"op": "add", "path": path,
                                             "value": sorted(traits)}])
        except ironic_exc.NotFound:
            raise errors.ServiceError("ironic", errors.FAILED,
                                      f"Ironic: node {uuid} not found") from None

    @_translated
    def set_resource_class(self, uuid, resource_class):
        """Set (or, with None, remove) a node's resource_class; returns the new record."""
        op = ({"op": "remove", "path": "/resource_class"} if resource_class is None else
              {"op": "add", "path": "/resource_class", "value": resource_class})
        return _record(self._client.node.update(uuid, [op]))
