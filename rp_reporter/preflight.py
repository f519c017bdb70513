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

"""Can this reporter do its whole job with these credentials?  One row a check.

``rp-reporter check`` prints the rows and exits 0 only when none failed; the
agent runs the same checks at start and logs them.  A failed row says what to
grant or fix.  Checks that write leave nothing behind (a scratch provider is
created and deleted; an empty reshape changes nothing).
"""

from __future__ import annotations

import dataclasses
import ssl
import threading
import uuid as uuidlib

from keystoneauth1 import exceptions as ksa_exc

from rp_reporter import conf as rp_conf
from rp_reporter import errors
from rp_reporter import membership
from rp_reporter import wiring

OK, WARN, FAIL = "ok", "warn", "FAIL"
BACKEND_TIMEOUT = 15  # seconds: a tooz client may retry for longer while its backend is down


@dataclasses.dataclass(frozen=True)
class Row:
    check: str
    result: str  # OK, WARN (works, less well) or FAIL
    detail: str
    kind: str | None = None  # the ServiceError kind of a failure (for the exit status)


def _row(check, call):
    """Run one check: ``call()`` returns (result, detail); a ServiceError fails it."""
    try:
        result, detail = call()
    except errors.ServiceError as e:
        return Row(check, FAIL, str(e), e.kind)
    return Row(check, result, detail)


def _endpoint(section, adapter):
    """Where the section's endpoint is, and how it was found (override or catalog)."""
    check = f"{section} endpoint"
    try:
        url = adapter.get_endpoint()
        if url is None:  # keystoneauth's way of saying the catalog lacks it
            raise ksa_exc.EndpointNotFound(f"{adapter.interface} endpoint for "
                                           f"{adapter.service_type} service in "
                                           f"{adapter.region_name or 'any'} region not found")
    except ksa_exc.ClientException as e:
        error = errors.from_keystone(section, e)
        return Row(check, FAIL, str(error), error.kind)
    how = ("endpoint_override" if adapter.endpoint_override else
           f"catalog: {adapter.service_type}, interfaces {adapter.interface}, "
           f"region {adapter.region_name or '(any)'}")
    return Row(check, OK, f"{url} ({how})")


def _placement_rows(placement):
    rows = []

    def microversion():
        version = placement.max_microversion()
        if version < (1, 26):
            return FAIL, f"{version[0]}.{version[1]}: 1.26 or later needed"
        if version < (1, 30):
            return WARN, f"{version[0]}.{version[1]}: no bulk path (POST /reshaper needs 1.30)"
        return OK, f"{version[0]}.{version[1]}"
    rows.append(_row("placement microversion", microversion))

    # One scratch provider, deleted at the end, for both write checks.
    scratch = str(uuidlib.uuid4())
    created = {}

    def writes():
        created["generation"] = placement.create_provider(scratch,
                                                          f"rp-reporter-check-{scratch}")
        return OK, "may create and delete providers (a scratch one, deleted)"
    rows.append(_row("placement writes", writes))

    def reshape():
        if "generation" not in created:
            return WARN, "not tried: no scratch provider"
        try:  # an empty inventory for the empty scratch provider: changes nothing
            placement.reshape_inventories({scratch: (created["generation"], {})})
        except errors.ServiceError as e:
            if e.kind != errors.DENIED:
                raise
            return WARN, (f"POST /reshaper refused: new providers' inventories go one request "
                          f"each (slower first sync); {errors.denied_hint('placement')}")
        return OK, "may reshape: new providers' inventories go in bulk"
    rows.append(_row("placement reshaper", reshape))
    if "generation" in created:
        delete = _row("placement writes", lambda: (OK, placement.delete_provider(scratch)))
        if delete.result == FAIL:
            rows[-2] = delete
    return rows


def _scope_rows(conf, ironic, placement):
    """Listings: what Ironic shows, whether it is complete, against what Placement holds."""
    counts = {}

    def providers():
        counts["providers"] = set(placement.list_providers())
        return OK, f"may list providers: {len(counts['providers'])} carry the managed marker"

    def nodes():
        counts["nodes"] = {r["uuid"] for r in ironic.iter_nodes()}
        scope = ", ".join(f"{k} {v}" for k, v in (("conductor group", conf.ironic.conductor_group),
                                                 ("shard", conf.ironic.shard)) if v) or "all"
        if ironic.listing_gap:
            return FAIL, (f"{len(counts['nodes'])} nodes in scope ({scope}), but the listing "
                          f"is not shown complete, so no provider would ever be deleted: "
                          f"{ironic.listing_gap}")
        return OK, f"{len(counts['nodes'])} nodes in scope ({scope}); the listing is complete"

    rows = [_row("placement listing", providers), _row("ironic listing", nodes)]
    if "providers" in counts and "nodes" in counts:
        held = counts["providers"] & counts["nodes"]
        if counts["providers"] and not counts["nodes"]:
            rows.append(Row("nodes against providers", FAIL,
                            f"Ironic shows no nodes, while Placement holds "
                            f"{len(counts['providers'])} managed providers: the [ironic] "
                            f"credentials, conductor_group, shard or endpoint are wrong; "
                            f"{errors.GRANTS['ironic']}", errors.MISCONFIGURED))
        else:
            rows.append(Row("nodes against providers", OK,
                            f"{len(counts['nodes'])} nodes; {len(held)} of them have a "
                            f"managed provider; {len(counts['providers']) - len(held)} managed "
                            f"providers are for nodes outside this scope or gone"))
    return rows


def _bus_option(conf):
    """Which option named the agent's bus, as a row names it."""
    return ("[notifications] transport_url" if conf.notifications.transport_url
            else "[DEFAULT] transport_url")


def _ssl(conf):
    """kombu's ssl argument from [oslo_messaging_rabbit], as oslo.messaging's rabbit
    driver builds it: False, True (the system's CAs), or the files to use."""
    rabbit = conf.oslo_messaging_rabbit
    if not rabbit.ssl:
        return False
    files = {"keyfile": rabbit.ssl_key_file, "certfile": rabbit.ssl_cert_file,
             "ca_certs": rabbit.ssl_ca_file}
    params = {name: path for name, path in files.items() if path}
    if rabbit.ssl_ca_file:
        params["cert_reqs"] = ssl.CERT_REQUIRED
    return params or True


def _transport_row(conf):
    url = rp_conf.bus_url(conf)
    if not url:
        return Row("notifications", WARN, "no transport_url ([DEFAULT], or [notifications]): "
                                          "the agent runs the reconcile loop only (no fast path)")

    import kombu
    import oslo_messaging

    parsed = oslo_messaging.TransportURL.parse(conf, url)
    failures = []
    for host in parsed.hosts:
        connection = kombu.Connection(hostname=host.hostname, port=host.port,
                                      userid=host.username, password=host.password,
                                      virtual_host=parsed.virtual_host or "/",
                                      connect_timeout=5, ssl=_ssl(conf))
        try:
            connection.ensure_connection(max_retries=1)
            return Row("notifications", OK, f"{host.hostname}:{host.port} answers")
        except Exception as e:  # noqa: BLE001 - kombu raises many kinds
            failures.append(f"{host.hostname}:{host.port}: {e}")
        finally:
            connection.release()
    return Row("notifications", FAIL, f"{_bus_option(conf)}: no broker answers: "
               + "; ".join(failures), errors.UNAVAILABLE)


def _coordination_row(conf):
    if not conf.coordination.backend_url:
        how = "static [ring] peer_list" if conf.ring.peer_list else "alone: owns every node"
        return Row("coordination", OK, f"no backend: {how}")
    # A daemon thread, not a pool: a tooz call can block for as long as its client
    # retries, and a pool's worker would hold the process at exit (an agent told to
    # stop while its backend is down must stop at once).
    answer = {}

    def ask():
        try:
            answer["members"], _ = membership.live_members(conf)
        except Exception as e:  # noqa: BLE001 - tooz drivers raise their own kinds
            answer["error"] = e

    thread = threading.Thread(target=ask, name="check-coordination", daemon=True)
    thread.start()
    thread.join(BACKEND_TIMEOUT)
    if "members" in answer:
        return Row("coordination", OK, f"backend answers; {len(answer['members'])} live members "
                                       f"in group {conf.coordination.group}")
    detail = (f"{answer['error']}" if "error" in answer else
              f"no answer within {BACKEND_TIMEOUT} s")
    return Row("coordination", FAIL, f"[coordination] backend_url: {detail}", errors.UNAVAILABLE)


def run(conf, listings=True):
    """Every check, in the order an operator fixes them (``listings=False``: not the
    full listings of both services, the costly ones on a large fleet)."""
    placement, ironic = wiring.placement_client(conf), wiring.ironic_client(conf)
    rows = [_endpoint("ironic", ironic.adapter), _endpoint("placement", placement.adapter)]
    rows += _placement_rows(placement)
    if listings:
        rows += _scope_rows(conf, ironic, placement)
    try:
        rows.append(_transport_row(conf))
    except Exception as e:  # noqa: BLE001 - a bad URL, an unknown driver
        rows.append(Row("notifications", FAIL, f"{_bus_option(conf)}: {e}",
                        errors.MISCONFIGURED))
    rows.append(_coordination_row(conf))
    return rows


def exit_status(rows):
    """0 when nothing failed; 2 when a failure is configuration or grants; else 1."""
    failed = [r for r in rows if r.result == FAIL]
    if not failed:
        return 0
    return 1 if all(r.kind == errors.UNAVAILABLE for r in failed) else 2
