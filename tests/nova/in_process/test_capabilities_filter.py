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

"""Capabilities as traits, against nova's real ComputeCapabilitiesFilter.

On the real Ironic and Placement of the local stack: nodes with varied capabilities get
their derived traits (``rp-reporter traits from-capabilities``) and a reconcile pass gives
the providers those traits.  Then, for each flavor, the providers Placement's real
``GET /allocation_candidates`` returns for the flavor as ``rp-reporter flavor translate``
rewrites it (``translate_flavor(...).specs``) must be exactly the nodes nova would pick for
the ORIGINAL flavor: nova's own resource request from the flavor (its ``resources:``
overrides, ``nova.scheduler.utils.ResourceRequest``) on the node's class, and nova's own
``ComputeCapabilitiesFilter.host_passes`` over a real ``HostState`` whose stats are what
nova's Ironic driver reports for the node (``IronicDriver._node_resource`` over the node
read by nova's own ``IronicDriver._get_node`` (openstacksdk), then nova's resource tracker path:
``ComputeNode.update_from_virt_driver`` and ``compute.stats.Stats.digest_stats``).
"""

import json
import subprocess
import sys
import uuid

import nova.conf
import pytest
import requests
from nova import objects
from nova.compute import stats as compute_stats
from nova.scheduler import host_manager
from nova.scheduler import utils as scheduler_utils
from nova.scheduler.filters import compute_capabilities_filter
from nova.virt.ironic import driver as nova_driver

from rp_reporter import conf as rp_conf
from rp_reporter import model
from rp_reporter import wiring
from rp_reporter.traits import DEFAULT_RULES
from rp_reporter.traits import derive_traits
from rp_reporter.traits import translate_flavor

CONF = nova.conf.CONF
MICROVERSION = "placement 1.31"  # >= 1.17 (required=), as nova's scheduler asks
CELL = str(uuid.uuid4())
ZERO = {"resources:VCPU": "0", "resources:MEMORY_MB": "0", "resources:DISK_GB": "0"}

# Node capabilities, by resource class ("large" / "small" get a per-run suffix, so no
# other test's node has the class and Placement's whole answer can be compared).
NODES = {
    "large-uefi-secure-gpt": ("large", "boot_mode:uefi,secure_boot:true,disk_label:gpt"),
    "large-uefi-insecure": ("large", "boot_mode:uefi,secure_boot:false"),
    "large-bios-msdos": ("large", "boot_mode:bios,disk_label:msdos"),
    "large-none": ("large", None),
    "large-uefi-malformed": ("large", "boot_mode:uefi,a:b:c"),
    "large-bios-secure": ("large", "boot_mode:bios,secure_boot:true"),
    "large-spaced-key": ("large", "secure_boot:false, boot_mode:bios"),  # nova strips keys
    "small-uefi-secure": ("small", "boot_mode:uefi,secure_boot:true"),
    "small-bios": ("small", "boot_mode:bios"),
    "small-empty": ("small", ""),
    "small-gpt-uefi": ("small", "disk_label:gpt,boot_mode:uefi"),
    "small-only-malformed": ("small", "boot_mode:,secure_boot"),
}

# Flavors: capability specs (plus the class named by "rc"), as operators write them for nova.
FLAVORS = {
    "large uefi": ("large", {"capabilities:boot_mode": "uefi"}),
    "large uefi secure": ("large", {"capabilities:boot_mode": "uefi",
                                    "capabilities:secure_boot": "true"}),
    "large bios": ("large", {"capabilities:boot_mode": "bios"}),
    "large bios s==": ("large", {"capabilities:boot_mode": "s== bios"}),
    "large gpt": ("large", {"capabilities:disk_label": "gpt"}),
    "large secure": ("large", {"capabilities:secure_boot": "true"}),
    "large insecure": ("large", {"capabilities:secure_boot": "false"}),
    "large, no capabilities": ("large", {}),
    "small uefi": ("small", {"capabilities:boot_mode": "uefi"}),
    "small gpt uefi": ("small", {"capabilities:disk_label": "gpt",
                                 "capabilities:boot_mode": "s== uefi"}),
    "small, no capabilities": ("small", {}),
}

# Specs the translation cannot express as required traits: each must be named, never
# silently turned into a trait.
UNTRANSLATABLE = {
    "capabilities:boot_mode": ["<or> uefi <or> bios", "s!= bios", "<in> uef", "s>= bios"],
    "capabilities:secure_boot": ["<all-in> true"],
    "capabilities:memory_mb": [">= 4096"],
    "capabilities:cpu_info:vendor": ["Intel"],
    "boot_mode": ["uefi"],  # unscoped: nova reads it only on nodes that have it
    "capabilities:boot_mode ": ["uefi"],  # never the key of a node's capability
    "capabilities:hypervisor_type": ["ironic"],  # a HostState attribute
    "hw:maxphysaddr_bits": ["42"],
}


@pytest.fixture(scope="module")
def nova_config(tmp_path_factory):
    path = tmp_path_factory.mktemp("nova-capabilities") / "nova.conf"
    path.write_text("[DEFAULT]\nhost = compute-a\n")
    CONF(["--config-file", str(path)], project="nova")
    objects.register_all()
    yield
    CONF.reset()


@pytest.fixture
def nova_ironic(nova_config, stack):
    """nova's own Ironic driver, reading the local stack's Ironic (openstacksdk)."""
    CONF.set_override("auth_type", "none", group="ironic")
    CONF.set_override("endpoint_override", stack.ironic_url, group="ironic")
    yield nova_driver.IronicDriver(virtapi=None)
    CONF.clear_override("auth_type", group="ironic")
    CONF.clear_override("endpoint_override", group="ironic")


def host_state(driver, node_id):
    """nova's HostState for one Ironic node, as the scheduler builds it from what the
    driver reports: _node_resource over the node nova's connection reads, then the
    resource tracker's copy into a ComputeNode (stats digested as it digests them)."""
    node = driver._get_node(node_id)  # nova's read: its connection, its fields
    resources = driver._node_resource(node)
    compute = objects.ComputeNode()
    compute.update_from_virt_driver(resources)
    stats = compute_stats.Stats()
    stats["failed_builds"] = 0  # the resource tracker's _copy_resources
    stats.digest_stats(resources.get("stats"))
    compute.stats = stats
    # What the resource tracker fills in beside the driver's dict (usage, ratios).
    for field, value in {"free_disk_gb": 0, "free_ram_mb": 0, "local_gb_used": 0,
                         "pci_device_pools": None, "metrics": None, "updated_at": None,
                         "host_ip": None, "cpu_allocation_ratio": 1.0,
                         "ram_allocation_ratio": 1.0, "disk_allocation_ratio": 1.0}.items():
        setattr(compute, field, value)
    state = host_manager.HostState(CONF.host, node_id, CELL)
    state.update(compute=compute)
    return node, state


def request_spec(extra_specs):
    flavor = objects.Flavor(name="f", flavorid="f", vcpus=1, memory_mb=1024, root_gb=10,
                            ephemeral_gb=0, swap=0, extra_specs=dict(extra_specs))
    return objects.RequestSpec(flavor=flavor, is_bfv=False,
                               image=objects.ImageMeta(properties=objects.ImageMetaProps()))


def nova_picks(nodes, extra_specs):
    """The nodes nova would schedule the ORIGINAL flavor to: nova's resource request
    from the flavor (its resources: overrides) on the node's one unit of its class,
    then nova's ComputeCapabilitiesFilter."""
    spec = request_spec(extra_specs)
    wanted = scheduler_utils.ResourceRequest.from_request_spec(spec).merged_resources()
    capability_filter = compute_capabilities_filter.ComputeCapabilitiesFilter()
    picked = set()
    for node_id, (node, state) in nodes.items():
        node_class, _ = model.normalize_resource_class(node.resource_class)
        if not wanted or any(rc != node_class or amount > 1 for rc, amount in wanted.items()):
            continue
        if capability_filter.host_passes(state, spec):
            picked.add(node_id)
    return picked


def placement_candidates(stack, specs):
    """Providers in Placement's real GET /allocation_candidates for these flavor specs."""
    resources = {k.split(":", 1)[1]: int(v) for k, v in specs.items()
                 if k.startswith("resources:") and int(v) > 0}
    required = sorted(k.split(":", 1)[1] for k, v in specs.items()
                      if k.startswith("trait:") and v == "required")
    params = {"resources": ",".join(f"{rc}:{n}" for rc, n in sorted(resources.items()))}
    if required:
        params["required"] = ",".join(required)
    resp = requests.get(f"{stack.placement_url}/allocation_candidates", params=params,
                        headers={"X-Auth-Token": "admin", "OpenStack-API-Version": MICROVERSION},
                        timeout=30)
    assert resp.status_code == 200, f"{resp.url}: {resp.status_code} {resp.text}"
    return set(resp.json()["provider_summaries"]), resp.url


def nova_query(specs):
    """(resources, required traits) nova's own ResourceRequest reads from these specs."""
    request = scheduler_utils.ResourceRequest.from_request_spec(request_spec(specs))
    return request.merged_resources(), set(request.all_required_traits)


@pytest.fixture
def fleet_nodes(stack, ironic, nova_ironic, tmp_path):
    """Enroll NODES, derive their traits with the CLI, reconcile; (names, classes, read)."""
    suffix = uuid.uuid4().hex[:8]
    classes = {size: f"cap-{suffix}-{size}" for size in ("large", "small")}
    names = {}
    for name, (size, caps) in NODES.items():
        node = ironic.create(resource_class=classes[size])
        if caps is not None:
            ironic.patch(node, **{"properties/capabilities": caps})
        ironic.patch(node, **{"properties/cpu_arch": "x86_64"})
        names[node] = name
    conf_file = tmp_path / "rp_reporter.conf"
    conf_file.write_text(stack.reporter_conf(ironic={"shard": ironic.shard}))
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file",
                           str(conf_file), "traits", "from-capabilities", "-f", "json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert {row["node"] for row in json.loads(proc.stdout)} >= set(names)
    summary = wiring.reconciler(rp_conf.load(["--config-file", str(conf_file)])).run()
    assert summary.converged, summary.as_dict()
    read = {node: host_state(nova_ironic, node) for node in names}
    return names, classes, read


def test_allocation_candidates_for_the_translated_flavor_are_the_nodes_novas_filter_passes(
        stack, fleet_nodes, placement):
    names, classes, nodes = fleet_nodes
    # The providers carry the derived traits (the malformed piece gave none).
    for node, name in names.items():
        derived = derive_traits(DEFAULT_RULES, {"capabilities": NODES[name][1]})
        assert derived <= placement.provider(node)["traits"], name
    report = []
    for flavor, (size, capability_specs) in FLAVORS.items():
        original = {**ZERO, f"resources:{model.normalize_resource_class(classes[size])[0]}":
                    "1", **capability_specs}
        translation = translate_flavor(DEFAULT_RULES, original)
        assert translation.untranslated == (), (flavor, translation.untranslated)
        # nova reads the translated specs as the query below asks: same class, same traits.
        resources, required = nova_query(translation.specs)
        assert required == {t for k, v in translation.specs.items()
                            if k.startswith("trait:") and v == "required"
                            for t in [k.split(":", 1)[1]]}
        assert resources == nova_query(original)[0], flavor
        expected = nova_picks(nodes, original)
        got, url = placement_candidates(stack, translation.specs)
        report.append((flavor, sorted(names[n] for n in expected)))
        assert {names.get(n, n) for n in got} == {names[n] for n in expected}, (flavor, url)
        # Non-trivial: each flavor picks some of the nodes, never all of them.
        assert 0 < len(expected) < len(nodes), flavor
    print("flavor -> nodes nova's filter and Placement both pick:")
    for flavor, picked in report:
        print(f"  {flavor}: {picked}")


@pytest.mark.parametrize("key,value", [(k, v) for k, vs in UNTRANSLATABLE.items() for v in vs])
def test_specs_the_translation_cannot_express_are_named_not_mistranslated(key, value):
    good, trait = (("capabilities:secure_boot", "true"), "CUSTOM_CAP_SECURE_BOOT_TRUE") \
        if key == "capabilities:boot_mode" else (("capabilities:boot_mode", "uefi"),
                                                 "CUSTOM_CAP_BOOT_MODE_UEFI")
    original = {**ZERO, "resources:CUSTOM_CAP_LARGE": "1", good[0]: good[1], key: value}
    translation = translate_flavor(DEFAULT_RULES, original)
    assert [k for k, _, reason in translation.untranslated if reason] == [key]
    # The spec it could express is still translated; the one it could not adds no trait.
    traits = {k for k in translation.specs if k.startswith("trait:")}
    assert traits == {f"trait:{trait}"}, traits
    assert key not in translation.specs


# Spellings nova tells apart (its filter compares strings exactly) but that one trait name
# would merge: upper and lower case, '-' and '_'.
SPELLINGS = {
    "upper": "boot_mode:UEFI",
    "lower": "boot_mode:uefi",
    "dash": "disk_label:gpt-x",
    "underscore": "disk_label:gpt_x",
    "trailing-space": "boot_mode:bios ",
    "bios": "boot_mode:bios",
}
SPELLING_FLAVORS = [{"capabilities:boot_mode": "uefi"}, {"capabilities:boot_mode": "UEFI"},
                    {"capabilities:disk_label": "gpt-x"}, {"capabilities:disk_label": "gpt_x"},
                    {"capabilities:boot_mode": "bios"}]


def test_spellings_nova_tells_apart_are_never_merged_by_a_trait(stack, ironic, nova_ironic,
                                                                placement, tmp_path):
    """Each flavor picks exactly what nova picks, or its spec is named untranslated."""
    resource_class = f"cap-{uuid.uuid4().hex[:8]}"
    names = {}
    for name, caps in SPELLINGS.items():
        node = ironic.create(resource_class=resource_class)
        ironic.patch(node, **{"properties/capabilities": caps})
        names[node] = name
    conf_file = tmp_path / "rp_reporter.conf"
    conf_file.write_text(stack.reporter_conf(ironic={"shard": ironic.shard}))
    proc = subprocess.run([sys.executable, "-m", "rp_reporter.cli", "--config-file",
                           str(conf_file), "traits", "from-capabilities"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    assert wiring.reconciler(rp_conf.load(["--config-file", str(conf_file)])).run().converged
    nodes = {node: host_state(nova_ironic, node) for node in names}
    rc = model.normalize_resource_class(resource_class)[0]
    wrong = []
    for capability_specs in SPELLING_FLAVORS:
        original = {**ZERO, f"resources:{rc}": "1", **capability_specs}
        translation = translate_flavor(DEFAULT_RULES, original)
        if translation.untranslated:
            continue  # named, not mistranslated
        expected = {names[n] for n in nova_picks(nodes, original)}
        got = {names.get(n, n) for n in placement_candidates(stack, translation.specs)[0]}
        if got != expected:
            wrong.append((capability_specs, sorted(got), sorted(expected)))
    assert not wrong, "flavor, Placement's candidates, nova's picks: " + repr(wrong)
