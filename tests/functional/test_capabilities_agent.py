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

"""The agent keeps derived traits in step ([traits] rules_file), on real Ironic,
Placement, RabbitMQ and Redis: on the Ironic node (the truth nova hands to Ironic)
and on the provider, in the same sync; by the fast path, not the reconcile
interval; never touching a trait an operator set by hand."""

import signal
import time

import pytest

from tests.functional.agents import traits
from tools.wait import wait_for

pytestmark = pytest.mark.functional

UEFI, BIOS = "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CAP_BOOT_MODE_BIOS"
SECURE = "CUSTOM_CAP_SECURE_BOOT_TRUE"
RULES = "capabilities: [boot_mode, secure_boot, disk_label]\n"
FAST = 10  # seconds: the fast path's bound here (the reconcile interval is an hour)


@pytest.fixture
def rules_file(tmp_path):
    path = tmp_path / "traits.yaml"
    path.write_text(RULES)
    return path


def node_traits(ironic, node):
    return set(ironic.get(node)["traits"])


def set_capabilities(ironic, node, value):
    ironic.patch(node, **{"properties/capabilities": value})


def in_step(ironic, placement, node, present=(), absent=()):
    """The node and its provider both carry ``present`` and neither ``absent``."""
    on_node, on_provider = node_traits(ironic, node), traits(placement, node)
    return all(t in on_node and t in on_provider for t in present) and not any(
        t in on_node or t in on_provider for t in absent)


def test_derived_traits_follow_capabilities_on_node_and_provider(agents, ironic, placement,
                                                                 rules_file):
    uefi, bios, plain = ironic.create_many(3)
    set_capabilities(ironic, uefi, "boot_mode:uefi,secure_boot:true")
    set_capabilities(ironic, bios, "boot_mode:bios")
    ironic.set_traits(plain, ["CUSTOM_OPERATOR"])
    agent = agents(traits={"rules_file": rules_file})  # reconcile every hour
    wait_for(lambda: in_step(ironic, placement, uefi, {UEFI, SECURE}, {BIOS}), 30, "uefi node")
    wait_for(lambda: in_step(ironic, placement, bios, {BIOS}, {UEFI, SECURE}), 30, "bios node")
    wait_for(lambda: "CUSTOM_OPERATOR" in traits(placement, plain), 30, "plain node")
    assert node_traits(ironic, plain) == {"CUSTOM_OPERATOR"}
    # What the agent added is recorded on the node, so a later change removes only that.
    assert set(ironic.get(uefi)["extra"]["rp_reporter_derived_traits"]) == {UEFI, SECURE}

    # A capability changes: the node and the provider follow by the fast path.
    started = time.monotonic()
    set_capabilities(ironic, uefi, "boot_mode:bios")
    wait_for(lambda: in_step(ironic, placement, uefi, {BIOS}, {UEFI, SECURE}), FAST,
             "uefi -> bios on node and provider")
    changed_after = time.monotonic() - started
    set_capabilities(ironic, plain, "disk_label:gpt")
    wait_for(lambda: in_step(ironic, placement, plain, {"CUSTOM_CAP_DISK_LABEL_GPT",
                                                        "CUSTOM_OPERATOR"}), FAST,
             "capabilities added to a node")
    # Capabilities gone: the derived trait goes, the operator's stays.
    ironic.patch(plain, **{"properties/capabilities": None})
    wait_for(lambda: in_step(ironic, placement, plain, {"CUSTOM_OPERATOR"},
                             {"CUSTOM_CAP_DISK_LABEL_GPT"}), FAST, "capabilities removed")
    assert "written to Ironic" in agent.output() and uefi in agent.output()
    assert agent.healthy() and "Traceback" not in agent.output()
    print(f"capability change to node and provider: {changed_after:.2f} s")


def test_a_trait_set_by_hand_is_never_removed(agents, ironic, placement, rules_file):
    node, early = ironic.create_many(2)
    # Set by hand before the agent derived it: never recorded as the agent's.
    ironic.set_traits(early, [UEFI])
    set_capabilities(ironic, early, "boot_mode:uefi")
    set_capabilities(ironic, node, "boot_mode:uefi")
    agents(traits={"rules_file": rules_file})
    wait_for(lambda: in_step(ironic, placement, node, {UEFI}), 30, "derived")
    wait_for(lambda: in_step(ironic, placement, early, {UEFI}), 30, "kept")
    # An operator adds traits by hand beside the derived one, one of them a derived name.
    ironic.set_traits(node, [UEFI, "CUSTOM_HAND", SECURE])
    wait_for(lambda: in_step(ironic, placement, node, {UEFI, "CUSTOM_HAND", SECURE}), FAST,
             "hand-set traits on the provider")
    for n in (node, early):
        set_capabilities(ironic, n, "boot_mode:bios")
    wait_for(lambda: in_step(ironic, placement, node, {BIOS, "CUSTOM_HAND", SECURE}, {UEFI}),
             FAST, "the derived trait replaced, the hand-set ones kept")
    wait_for(lambda: in_step(ironic, placement, early, {BIOS, UEFI}), FAST,
             "a trait set by hand before the agent derived it is kept")


def test_odd_capability_strings_give_no_wrong_trait(agents, ironic, placement, rules_file):
    odd = {
        "a:b:c": set(),
        "boot_mode:": set(),
        ":uefi": set(),
        "boot_mode:uefi:x": set(),
        "x" * 10_240: set(),  # 10 KB, no colon
        "boot_mode:" + "u" * 10_240: set(),  # a valid piece whose trait would be too long
        "secure_boot:true," + ",".join(f"k{i}:v:{i}" for i in range(1000)): {SECURE},
        "a:b:c,boot_mode:uefi": {UEFI},
        " boot_mode:bios": {BIOS},  # nova strips the key, not the value
    }
    nodes = dict(zip(ironic.create_many(len(odd)), odd.items(), strict=True))
    for node, (value, _) in nodes.items():
        set_capabilities(ironic, node, value)
    agent = agents(traits={"rules_file": rules_file})
    good = ironic.create()
    set_capabilities(ironic, good, "boot_mode:uefi")
    wait_for(lambda: in_step(ironic, placement, good, {UEFI}), 30, "a good node after them")
    for node, (value, expected) in nodes.items():
        wait_for(lambda n=node: placement.provider(n) is not None, 30, "provider")
        wait_for(lambda n=node, e=expected: node_traits(ironic, n) == e
                 and traits(placement, n) == e | {"CUSTOM_RPR_MANAGED"}, FAST, value[:40])
    assert agent.healthy() and agent.proc.poll() is None
    output = agent.output()
    assert "Traceback" not in output
    # Each odd node is named on one line (however many passes), and no line carries 10 KB.
    for node, (value, _) in nodes.items():
        if value not in (" boot_mode:bios",):
            assert output.count(f"node {node}: derived traits: skipped") == 1, value[:40]
    assert max(len(line) for line in output.splitlines()) < 2_000


def test_the_reconcile_pass_writes_only_nodes_out_of_step(agents, ironic, placement,
                                                           rules_file):
    nodes = ironic.create_many(4)
    for node in nodes[:3]:
        set_capabilities(ironic, node, "boot_mode:uefi")
    agent = agents(traits={"rules_file": rules_file}, notifications={"transport_url": ""},
                   reconcile={"interval": 1, "jitter": 0})
    for node in nodes[:3]:
        wait_for(lambda n=node: in_step(ironic, placement, n, {UEFI}), 30, "via reconcile")
    wait_for(lambda: "CUSTOM_RPR_MANAGED" in traits(placement, nodes[3]), 30, "the 4th")
    updated = {n: ironic.get(n)["updated_at"] for n in nodes}
    writes = agent.output().count("written to Ironic")
    time.sleep(4)  # several passes with nothing changed
    assert {n: ironic.get(n)["updated_at"] for n in nodes} == updated  # no Ironic write
    assert agent.output().count("written to Ironic") == writes >= 3
    assert agent.metric("rp_reporter_last_reconcile_drift") == 0
    set_capabilities(ironic, nodes[3], "secure_boot:true")  # no bus: the pass carries it
    wait_for(lambda: in_step(ironic, placement, nodes[3], {SECURE}), 15, "via reconcile")
    assert agent.output().count("written to Ironic") == writes + 1


def test_rules_load_once_and_a_bad_file_never_replaces_good_rules(agents, ironic, placement,
                                                                   rules_file, tmp_path):
    import subprocess
    import sys

    # At start: one line, exit 2.
    bad = tmp_path / "bad.yaml"
    bad.write_text("capabilities: {boot_mode: {values: [uefi], colour: red}}\n")
    conf = tmp_path / "bad.conf"
    conf.write_text(f"[ironic]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    f"[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:9\n"
                    f"[traits]\nrules_file = {bad}\n")
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.agent", "--config-file",
                           str(conf)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(bad) in proc.stderr and "colour" in proc.stderr

    node = ironic.create()
    set_capabilities(ironic, node, "boot_mode:uefi")
    agent = agents(traits={"rules_file": rules_file})
    wait_for(lambda: in_step(ironic, placement, node, {UEFI}), 30, "derived")
    # SIGHUP with a broken file: the rules in force stay, one line says so.
    rules_file.write_text("capabilities: [boot_mode\n")
    agent.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "trait rules not reloaded" in agent.output(), 10, "the reload refused")
    assert agent.output().count("trait rules not reloaded") == 1
    set_capabilities(ironic, node, "boot_mode:uefi,secure_boot:true")
    wait_for(lambda: in_step(ironic, placement, node, {UEFI, SECURE}), FAST, "old rules")
    # SIGHUP with good new rules: secure_boot no longer derives; its trait goes.
    rules_file.write_text("capabilities: [boot_mode]\n")
    agent.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "trait rules reloaded" in agent.output(), 10, "the reload")
    wait_for(lambda: in_step(ironic, placement, node, {UEFI}, {SECURE}), FAST, "new rules")
    assert agent.healthy()


def test_a_write_ironic_refuses_is_logged_once_however_many_passes(agents, ironic, rules_file):
    # Ironic takes at most 50 traits a node: the derived one is refused (400) on every
    # pass, each refusal with its own request id in ironicclient's message.
    node = ironic.create(traits=[f"CUSTOM_T{i}" for i in range(50)])
    set_capabilities(ironic, node, "boot_mode:uefi")
    agent = agents(traits={"rules_file": rules_file}, reconcile={"interval": 1, "jitter": 0})
    wait_for(lambda: "derived traits not written" in agent.output(), 20, "Ironic's refusal")
    assert "Request-ID" in agent.output()
    time.sleep(5)  # five more passes at a 1 s interval, each refused again
    lines = [line for line in agent.output().splitlines()
             if node in line and "derived traits not written" in line]
    assert len(lines) == 1, lines
    assert UEFI not in node_traits(ironic, node)
