"""The per-node sync's desired(): the model with the reporter's options (the agent's,
the reconcile pass's and the CLI's)."""

import logging
import uuid

from rp_reporter import model
from rp_reporter.sync import node as node_sync

NODE = {"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "resource_class": "gold",
        "provision_state": "available", "power_state": "power off", "maintenance": False,
        "instance_uuid": str(uuid.uuid4()), "traits": ["CUSTOM_A", "CUSTOM_RPR_MANAGED"]}


def test_skip_reserve_in_use_reaches_the_model():
    node = model.node_from_api(NODE)
    assert node_sync.NodeSync(None, None).desired(node).reserved == 1
    assert node_sync.NodeSync(None, None, skip_reserve_in_use=True).desired(node).reserved == 0


def test_refused_node_traits_are_logged_once(caplog):
    nodes = node_sync.NodeSync(None, None)
    node = model.node_from_api(NODE)
    with caplog.at_level(logging.WARNING, logger=node_sync.__name__):
        for _ in range(3):
            desired = nodes.desired(node)
    assert desired.traits == {"CUSTOM_A"}
    assert [r.getMessage() for r in caplog.records if "CUSTOM_RPR_MANAGED" in r.getMessage()] \
        == [f"node {NODE['uuid']}: {desired.refusal}"]
