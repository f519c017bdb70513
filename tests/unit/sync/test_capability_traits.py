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

"""NodeTraits: the per-node step, against a fake Ironic that can crash at any write."""

import pytest

from rp_reporter.sync.capability_traits import NodeTraits
from rp_reporter.traits import DEFAULT_RULES
from rp_reporter.traits import RECORD_KEY


class Crash(Exception):
    pass


class FakeIronic:
    def __init__(self, traits, recorded=None, crash_at=None):
        self.traits = set(traits)
        self.extra = {} if recorded is None else {RECORD_KEY: sorted(recorded)}
        self.calls = []
        self.crash_at = crash_at

    def _call(self, *call):
        if self.crash_at is not None and len(self.calls) == self.crash_at:
            raise Crash
        self.calls.append(call)

    def add_trait(self, uuid, trait):
        self._call("add", trait)
        self.traits.add(trait)

    def remove_trait(self, uuid, trait):
        self._call("remove", trait)
        self.traits.discard(trait)
        return True

    def record_derived_traits(self, uuid, traits):
        self._call("record", tuple(sorted(traits)))
        self.extra[RECORD_KEY] = sorted(traits)

    def record(self, capabilities):
        return {"uuid": "u1", "traits": sorted(self.traits), "extra": dict(self.extra),
                "properties": {"capabilities": capabilities}}


UEFI, BIOS = "CUSTOM_CAP_BOOT_MODE_UEFI", "CUSTOM_CAP_BOOT_MODE_BIOS"


def test_apply_orders_record_add_remove_record():
    ironic = FakeIronic({UEFI, "CUSTOM_HAND"}, recorded={UEFI})
    changes = NodeTraits(ironic, DEFAULT_RULES).apply(ironic.record("boot_mode:bios"))
    assert (changes.add, changes.remove) == ({BIOS}, {UEFI})
    assert ironic.calls == [("record", (BIOS, UEFI)), ("add", BIOS), ("remove", UEFI),
                            ("record", (BIOS,))]
    assert ironic.traits == {BIOS, "CUSTOM_HAND"}


def test_dry_run_and_second_run_write_nothing():
    ironic = FakeIronic(set())
    step = NodeTraits(ironic, DEFAULT_RULES)
    assert step.apply(ironic.record("boot_mode:uefi"), dry_run=True).add == {UEFI}
    assert ironic.calls == []
    step.apply(ironic.record("boot_mode:uefi"))
    ironic.calls.clear()
    assert not step.apply(ironic.record("boot_mode:uefi")).changed and ironic.calls == []


@pytest.mark.parametrize("crash_at", range(4))
def test_a_crash_at_any_write_loses_nothing(crash_at):
    ironic = FakeIronic({UEFI, "CUSTOM_HAND"}, recorded={UEFI}, crash_at=crash_at)
    step = NodeTraits(ironic, DEFAULT_RULES)
    with pytest.raises(Crash):
        step.apply(ironic.record("boot_mode:bios"))
    ironic.crash_at = None
    step.apply(ironic.record("boot_mode:bios"))
    assert ironic.traits == {BIOS, "CUSTOM_HAND"}
    assert ironic.extra[RECORD_KEY] == [BIOS]
    # And back: our trait goes, the hand-set one stays.
    step.apply(ironic.record("boot_mode:uefi"))
    assert ironic.traits == {UEFI, "CUSTOM_HAND"}
