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

"""nova's host aggregates that confine a project to its nodes (rp_reporter.tenancy).

One aggregate per project that may deploy on some node, with no hosts: nova's
scheduler reads its uuid and its ``filter_tenant_id`` metadata, never its hosts.
It is made through nova's API (the ``[nova]`` section's user needs nova's admin
role: every aggregate policy defaults to it) and never deleted: a project that
lost its last node keeps an empty aggregate, and nova then answers its requests
with NoValidHost, the safe answer while its dedicated flavor may still be used.

Made in two calls (create, then set the metadata), so a crash between them
leaves an aggregate with our name and no metadata; ``ensure`` finishes it.  Two
agents making the same one meet on nova's unique names: the second's create is
refused (409) and it reads the first's.
"""

import dataclasses
import functools
import logging
import threading

from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import errors
from rp_reporter import model
from rp_reporter import tenancy

LOG = logging.getLogger(__name__)

# 2.41: aggregates show their uuid, the one nova's scheduler hands Placement.
MICROVERSION = "2.41"


class NovaError(errors.ServiceError):
    def __init__(self, kind, method, url, status, detail=""):
        self.status = status
        super().__init__("nova", kind, f"nova {method} {url}: {status} {detail}".strip())


class TenantAggregates:
    """{project: aggregate uuid} of the tenant aggregates, made when missing."""

    def __init__(self, adapter):
        self._adapter = adapter
        self._known = {}
        self._uuids = frozenset()  # of every one known: asked once per node a pass
        self._lock = threading.Lock()

    def _request(self, method, url, expect, json=None):
        try:
            resp = self._adapter.request(
                url, method, json=json, raise_exc=False,
                headers={"OpenStack-API-Version": f"compute {MICROVERSION}",
                         "Accept": "application/json"})
        except (ksa_exc.ConnectionError, ksa_exc.RetriableConnectionFailure) as e:
            raise NovaError(errors.UNAVAILABLE, method, url, "unreachable", str(e)) from None
        except ksa_exc.ClientException as e:  # Keystone: credentials, catalog, scope
            raise errors.from_keystone("nova", e) from None
        if resp.status_code in expect:
            return resp
        detail = resp.text[:300]
        kind = {403: errors.DENIED, 401: errors.MISCONFIGURED}.get(
            resp.status_code, errors.UNAVAILABLE if resp.status_code >= 500 else errors.FAILED)
        if resp.status_code == 403:
            detail += ": give the [nova] user nova's admin role (aggregates are admin's)"
        raise NovaError(kind, method, url, resp.status_code, detail)

    def _aggregates(self):
        return self._request("GET", "/os-aggregates", (200,)).json()["aggregates"]

    def refresh(self):
        """Read every tenant aggregate from nova; returns {project: uuid}."""
        known = {}
        for aggregate in self._aggregates():
            project = tenancy.tenant_project(aggregate)
            if project is not None:
                known[project] = aggregate["uuid"]
        with self._lock:
            self._known = known
            self._uuids = frozenset(known.values())
        return dict(known)

    def known(self):
        with self._lock:
            return dict(self._known)

    def uuids(self):
        """Every tenant aggregate's uuid (one object until the set changes)."""
        with self._lock:
            return self._uuids

    def ensure(self, projects):
        """{project: uuid} for ``projects``, making the aggregates nova lacks."""
        with self._lock:
            found = {p: self._known[p] for p in projects if p in self._known}
        if len(found) == len(projects):
            return found  # the usual case: no copy of what is known
        known = self.refresh()
        for project in sorted(set(projects) - set(known)):
            known[project] = self._make(project)
            with self._lock:
                self._known[project] = known[project]
                self._uuids = self._uuids | {known[project]}
        return {p: known[p] for p in projects}

    def _make(self, project):
        name = tenancy.aggregate_name(project)
        resp = self._request("POST", "/os-aggregates", (200, 409),
                             json={"aggregate": {"name": name}})
        if resp.status_code == 200:
            aggregate = resp.json()["aggregate"]
            LOG.info("tenant aggregate %s (%s) made for project %s", name,
                     aggregate["uuid"], project)
        else:  # made by another agent, or by us before a crash: finish it
            aggregate = next((a for a in self._aggregates() if a["name"] == name), None)
            if aggregate is None:
                raise NovaError(errors.FAILED, "POST", "/os-aggregates", 409,
                                f"{name} refused, and no aggregate of that name: {resp.text[:200]}")
        metadata = aggregate.get("metadata") or {}
        if metadata.get(tenancy.TENANT_KEY) != project:
            if tenancy.TENANT_KEY in metadata:  # someone else's meaning: not ours to change
                raise NovaError(errors.FAILED, "GET", f"/os-aggregates/{aggregate['id']}",
                                "conflict", f"aggregate {name} has {tenancy.TENANT_KEY}="
                                f"{metadata[tenancy.TENANT_KEY]}, not {project}")
            self._request("POST", f"/os-aggregates/{aggregate['id']}/action", (200,),
                          json={"set_metadata": {"metadata": {tenancy.TENANT_KEY: project}}})
        return aggregate["uuid"]


class NodeTenancy:
    """Tenancy for the per-node sync: each node's claim, its derived public trait,
    and the aggregates its provider must be in (``[tenancy]`` options)."""

    def __init__(self, aggregates, rule=tenancy.LESSEE_ELSE_OWNER, public_owners=(),
                 kept=()):
        self.aggregates = aggregates  # TenantAggregates
        self.rule, self.public_owners = rule, frozenset(public_owners)
        self.kept = frozenset(kept)
        # A fleet has few distinct answers: one object each, not one per provider.
        self._shared = {}
        # A node's claim is asked for three times a sync (its aggregates made, its
        # derived traits, its desired provider), and a fleet has few distinct ones.
        self.claim = functools.lru_cache(maxsize=4096)(self._claim)

    def _claim(self, owner, lessee, automatic_lessee):
        return tenancy.claim(owner, lessee, automatic_lessee, self.rule, self.public_owners)

    def claim_of(self, record):
        """The claim on an Ironic node record (the derived traits' input)."""
        return self.claim(record.get("owner"), record.get("lessee"),
                          model.automatic_lessee(record))

    def _claim_on(self, node):
        return self.claim(node.owner, node.lessee, node.automatic_lessee)

    def derived_traits(self, record):
        return tenancy.derived_traits(self.claim_of(record))

    def start_pass(self):
        """Read nova's tenant aggregates again (another agent's new ones; an operator's
        change); nova unreachable: the ones known stay, and each node that needs a
        new one fails until nova is back."""
        try:
            self.aggregates.refresh()
        except errors.ServiceError as e:
            LOG.warning("tenant aggregates not read again, the known ones kept: %s", e)

    def prepare(self, node, dry_run=False):
        """Make the aggregates this node's projects need (a call to nova only for a
        project seen for the first time).  Raises errors.ServiceError: nothing of
        the node is written then, and its sync is retried.  ``dry_run``: make none;
        a project without one is this node's error (what a pass would make)."""
        projects = self._claim_on(node).projects
        if not dry_run:
            self.aggregates.ensure(projects)
            return
        missing = sorted(set(projects) - set(self.aggregates.known()))
        if missing:
            raise errors.ServiceError("nova", errors.FAILED,
                                      f"no tenant aggregate yet for project {', '.join(missing)}"
                                      f" (a pass makes it)")

    def desired(self, desired, node):
        """``desired`` with the aggregates its provider must be in."""
        projects = self._claim_on(node).projects
        tenants = self.aggregates.ensure(projects)
        wanted = self._share(tenancy.wanted_aggregates(projects, tenants, self.kept))
        return dataclasses.replace(desired, aggregates=wanted,
                                   managed_aggregates=self.aggregates.uuids())

    def _share(self, value):
        return self._shared.setdefault(value, value)
