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

"""What a move does to a server in each state, on nova's own in-process cloud (its
functional test base: nova's API, conductor, scheduler and a compute service with nova's
fake driver, its Placement, Neutron and database fixtures): servers booted through
nova's API, each put in the state a fenced service left it in, then handled by the new
home as ``recovery`` does, with nova's real request handlers (the delete, the reboot,
the power changes) and their real saves.  What the handlers did is read back from
nova's database, its Placement and its Neutron."""

import os
import sys
import warnings

from nova import context as nova_context
from nova import objects
from nova import utils as nova_utils
from nova.compute import task_states
from nova.compute import vm_states
from nova.tests.functional import integrated_helpers
from sqlalchemy import exc as sqla_exc

from rp_reporter.nova_compute import recovery

try:
    from nova import thread_pool_factory
except ImportError:  # nova before 34: its executors are nova.utils' (32, 33) or none
    thread_pool_factory = None


def executors_left_shut():
    """Shut the executors earlier tests of this process left: nova's executor fixture
    asserts there are none (nova 34: its thread pool factory's; 32 and 33: nova.utils'
    globals, each with its destroy_*_executor)."""
    if thread_pool_factory is not None:
        thread_pool_factory.reset_all_executors()
    for name in dir(nova_utils):
        if name.startswith("destroy_") and name.endswith("_executor"):
            getattr(nova_utils, name)()

DEAD = "compute-dead"

# (vm state, task state) the fenced service left -> (vm state, task state) after, None
# once the server is deleted.
STATES = {
    "a build": ((vm_states.BUILDING, task_states.SPAWNING), (vm_states.ERROR, None)),
    "a rebuild": ((vm_states.ACTIVE, task_states.REBUILD_SPAWNING), (vm_states.ERROR, None)),
    "a delete": ((vm_states.ACTIVE, task_states.DELETING), None),
    "a hard reboot asked": ((vm_states.ACTIVE, task_states.REBOOTING_HARD),
                            (vm_states.ACTIVE, None)),
    "a soft reboot asked": ((vm_states.ACTIVE, task_states.REBOOTING), (vm_states.ACTIVE, None)),
    "a power off": ((vm_states.ACTIVE, task_states.POWERING_OFF), (vm_states.STOPPED, None)),
    "a power on": ((vm_states.STOPPED, task_states.POWERING_ON), (vm_states.ACTIVE, None)),
    "a snapshot": ((vm_states.ACTIVE, task_states.IMAGE_SNAPSHOT), (vm_states.ACTIVE, None)),
    "a rescue asked": ((vm_states.ACTIVE, task_states.RESCUING), (vm_states.ACTIVE, None)),
    "idle": ((vm_states.ACTIVE, None), (vm_states.ACTIVE, None)),
}
# What nova's handler leaves as the instance action's event, where one runs.
EVENTS = {"a hard reboot asked": "compute_reboot_instance",
          "a soft reboot asked": "compute_reboot_instance",
          "a power off": "compute_stop_instance", "a power on": "compute_start_instance"}


class TestEachStateWithNovasHandlers(integrated_helpers._IntegratedTestBase):
    ADMIN_API = True
    microversion = "latest"

    def setUp(self):
        executors_left_shut()
        # nova's API paste file, where nova's package installs it (its source tree's
        # etc/, which the fixture looks for, is not installed).
        self.flags(api_paste_config=os.path.join(sys.prefix, "etc", "nova", "api-paste.ini"),
                   group="wsgi")
        self.flags(compute_driver="fake.MediumFakeDriver")  # room for a server per state
        super().setUp()
        # nova's fixture makes SQLAlchemy's deprecations errors; a newer SQLAlchemy than
        # a release's own tests ran on deprecates what nova's stop path still uses.
        warnings.filterwarnings("ignore", category=sqla_exc.SADeprecationWarning)

    def _clear_attrs(self):
        """Kept: nova's cleanup deletes the test's attributes, the test method pytest
        set on it among them, which pytest then deletes itself."""

    def _booted(self, vm_state):
        """A server booted through nova's API (stopped, for a ``vm_state`` STOPPED)."""
        server = self._create_server(networks="auto")
        if vm_state == vm_states.STOPPED:
            self._stop_server(server)
        return server["id"]

    @staticmethod
    def _left_in(ctxt, uuid, vm_state, task_state):
        """The server as a fenced service leaves it: in ``(vm_state, task_state)``, its
        request's instance action recorded (nova's API records one before it casts)."""
        instance = objects.Instance.get_by_uuid(ctxt, uuid)
        instance.vm_state, instance.task_state = vm_state, task_state
        instance.save()
        objects.InstanceAction.action_start(ctxt, uuid, "moved", want_result=False)
        return instance

    def _after(self, ctxt, uuid):
        found = objects.Instance.get_by_uuid(ctxt.elevated(read_deleted="yes"), uuid)
        return None if found.deleted else (found.vm_state, found.task_state)

    def _handled(self, ctxt, instance):
        """What the new home's handling of ``instance`` left: its states, its instance
        action's events, its allocations, its ports, its faults."""
        recovery.recover(self.compute.manager, ctxt, instance, DEAD)
        actions = objects.InstanceActionList.get_by_instance_uuid(ctxt, instance.uuid)
        return {
            "after": self._after(ctxt, instance.uuid),
            "events": {event.event for action in actions
                       for event in objects.InstanceActionEventList.get_by_action(
                           ctxt, action.id)},
            "allocations": bool(self._get_allocations_by_server_uuid(instance.uuid)),
            "ports": [port["id"] for port in self.neutron.list_ports(
                True, device_id=instance.uuid)["ports"]],
            "faults": [fault.message for fault in
                       objects.InstanceFaultList.get_by_instance_uuids(ctxt, [instance.uuid])],
        }

    def test_each_state_a_fenced_service_leaves(self):
        booted = {state: self._booted(left[0]) for state, (left, _) in STATES.items()}
        with nova_context.target_cell(nova_context.get_admin_context(),
                                      self.cell_mappings["cell1"]) as ctxt:
            servers = {state: self._left_in(ctxt, booted[state], *left)
                       for state, (left, _) in STATES.items()}
            seen = {state: self._handled(ctxt, instance) for state, instance in servers.items()}
        for state, (_, after) in STATES.items():
            self.assertEqual(after, seen[state]["after"], (state, seen[state]))
            if state in EVENTS:
                self.assertIn(EVENTS[state], seen[state]["events"], (state, seen[state]))
        deleted = seen["a delete"]
        self.assertEqual((False, []), (deleted["allocations"], deleted["ports"]), deleted)
        self.assertTrue(seen["idle"]["allocations"] and seen["idle"]["ports"], seen["idle"])
        self.assertEqual(1, len(seen["a build"]["faults"]), seen["a build"])
        self.assertIn(f"{DEAD} was fenced during the build", seen["a build"]["faults"][0])
        self.assertEqual([], seen["idle"]["faults"])
