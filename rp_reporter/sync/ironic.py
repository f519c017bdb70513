"""Ironic: the paginated node listing and the single-node read, via python-ironicclient."""

import logging

from ironicclient import client as ironic_client
from ironicclient.common.apiclient import exceptions as ironic_exc

LOG = logging.getLogger(__name__)

# Only what the model reads (fields= needs 1.8, traits in it 1.37,
# conductor_group 1.46, shard 1.82); the client negotiates the version.
NODE_FIELDS = ("uuid", "name", "resource_class", "provision_state", "power_state", "maintenance",
               "instance_uuid", "traits", "conductor_group", "shard")


# Ironic's own limit on a node's resource_class (a String(80) column).
RESOURCE_CLASS_MAX = 80


def _record(node, fields=NODE_FIELDS):
    data = node.to_dict()
    return {field: data.get(field) for field in fields}


class IronicClient:
    """Reads the nodes this reporter is responsible for."""

    def __init__(self, client, conductor_group=None, shard=None, page_size=1000):
        self._client = client
        self.conductor_group = conductor_group
        self.shard = shard
        self.page_size = page_size

    @classmethod
    def from_adapter(cls, adapter, **kwargs):
        client = ironic_client.Client("1", endpoint_override=adapter.get_endpoint(),
                                      session=adapter.session, os_ironic_api_version="latest",
                                      interface=adapter.interface)
        return cls(client, **kwargs)

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
        caller that keeps only what it needs never holds the whole listing."""
        fields = NODE_FIELDS + tuple(extra_fields)
        marker = None
        while True:
            page = self._client.node.list(fields=list(fields), limit=self.page_size,
                                          marker=marker, **self._scope())
            yield from (_record(n, fields) for n in page)
            if len(page) < self.page_size:
                return
            marker = page[-1].uuid

    def list_nodes(self, extra_fields=()):
        return list(self.iter_nodes(extra_fields))

    def list_all_uuids(self):
        """Every node uuid in Ironic, whatever the scope (to tell moved from gone)."""
        nodes = self._client.node.list(fields=["uuid"], limit=0)
        return {n.uuid for n in nodes}

    def get_node(self, ident):
        """One node's record (by uuid or name), or None when Ironic answers 404."""
        try:
            return _record(self._client.node.get(ident, fields=list(NODE_FIELDS)))
        except ironic_exc.NotFound:
            return None

    def set_resource_class(self, uuid, resource_class):
        """Set (or, with None, remove) a node's resource_class; returns the new record."""
        op = ({"op": "remove", "path": "/resource_class"} if resource_class is None else
              {"op": "add", "path": "/resource_class", "value": resource_class})
        return _record(self._client.node.update(uuid, [op]))
