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

"""A mover's claim (``claim``) in nova's own cell database, through nova's real
Instance objects and their compare-and-swap save: a service that comes back before its
claimed server moved gives the claim back, and the mover's write then fails."""

import pytest
from nova import exception
from nova import objects
from nova.compute import task_states
from nova.compute import vm_states

from rp_reporter.nova_compute import claim
from tests.nova.in_process.test_queued_builds import a_server

BACK, MOVER = "compute-back", "compute-mover"


def test_a_service_back_before_its_claimed_server_moved_gives_the_claim_back(cell):
    """nova's start-up (_init_instance) would clear ``migrating`` and lose the delete
    the server was in; the claim is given back first, and the mover writes nothing."""
    ctxt = cell
    claimed = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=task_states.MIGRATING,
                       host=BACK)
    claimed.system_metadata = {claim.CLAIM_KEY: f"{MOVER} {task_states.DELETING}"}
    claimed.save()
    old = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=claim.OLD_CLAIM + MOVER,
                   host=BACK)
    idle = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=None, host=BACK)
    elsewhere = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=task_states.MIGRATING,
                         host="compute-other")
    as_the_mover_read_it = objects.Instance.get_by_uuid(ctxt, claimed.uuid,
                                                        expected_attrs=["system_metadata"])
    claim.give_back(ctxt, BACK)

    def read(server):
        return objects.Instance.get_by_uuid(ctxt, server.uuid,
                                            expected_attrs=["system_metadata"])
    assert read(claimed).task_state == task_states.DELETING
    assert claim.CLAIM_KEY not in read(claimed).system_metadata
    assert read(old).task_state is None
    assert read(idle).task_state is None
    assert read(elsewhere).task_state == task_states.MIGRATING  # not this service's
    with pytest.raises(exception.UnexpectedTaskStateError):
        claim.move_instance(ctxt, as_the_mover_read_it, BACK, members=set())
    assert (read(claimed).host, read(claimed).task_state) == (BACK, task_states.DELETING)


def test_a_claim_is_made_and_moved_by_compare_and_swap(cell):
    """The claim and the move, in nova's database: the server moved, the task state the
    mover found put back, the claim gone; a second mover that read the server on the
    fenced service before writes nothing."""
    ctxt = cell
    server = a_server(ctxt, vm_state=vm_states.ACTIVE, task_state=task_states.REBOOTING,
                      host="compute-dead")
    first = objects.Instance.get_by_uuid(ctxt, server.uuid, expected_attrs=["system_metadata"])
    second = objects.Instance.get_by_uuid(ctxt, server.uuid, expected_attrs=["system_metadata"])
    claim.CONF.set_override("host", "compute-a")
    try:
        assert claim.move_instance(ctxt, first, "compute-dead") is True
    finally:
        claim.CONF.clear_override("host")
    claim.CONF.set_override("host", "compute-b")
    try:
        # its claim succeeds (the task state is the one it read again), its read under
        # the claim finds the server moved: it gives the claim back
        assert claim.move_instance(ctxt, second, "compute-dead") is False
    finally:
        claim.CONF.clear_override("host")
    found = objects.Instance.get_by_uuid(ctxt, server.uuid, expected_attrs=["system_metadata"])
    assert (found.host, found.task_state) == ("compute-a", task_states.REBOOTING)
    assert claim.CLAIM_KEY not in found.system_metadata
