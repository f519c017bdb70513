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

"""A mover's claim on a server: the instance step of a move (``rehome``), and the
claims given back by a service that comes back before its servers moved.

The claim is nova's own task state for a server moving between hosts (nova's
notifications accept only its own), set by a compare-and-swap on the task state read,
with the mover and the task state it found in the server's system metadata.  The
move's write (the server's host, and the task state found put back) is a
compare-and-swap on the claim: of two movers, or a mover and a service that came back,
one write wins and the other writes nothing.
"""

import logging

from nova import exception
from nova import objects
from nova.compute import task_states
from oslo_config import cfg

LOG = logging.getLogger(__name__)
CONF = cfg.CONF
CLAIM_STATE = task_states.MIGRATING
CLAIM_KEY = "rp_reporter_rehoming"
# An earlier release's claim, a task state of its own: finished like a dead mover's.
OLD_CLAIM = "rp-reporter-rehoming-"


def claim_of(instance):
    """(mover, task state it found) of a claim on ``instance``, or None."""
    if instance.task_state and instance.task_state.startswith(OLD_CLAIM):
        return instance.task_state[len(OLD_CLAIM):], None
    found = (instance.system_metadata or {}).get(CLAIM_KEY)
    if instance.task_state != CLAIM_STATE or not found:
        return None
    mover, _, state = found.partition(" ")
    return mover, (state or None)


def give_back(ctxt, host):
    """At the start of compute service ``host``, a live member again, before nova's own
    start-up handling: a claim a mover left on a server still homed here (the mover died,
    or this service came back first) is given back, the task state the mover found the
    server's again; nova's ``_init_instance`` would clear ``migrating`` and lose it (a
    delete asked, a reboot).  A mover's write after this fails its compare-and-swap."""
    for instance in objects.InstanceList.get_by_host(ctxt, host,
                                                     expected_attrs=["system_metadata"]):
        claim = claim_of(instance)
        if claim is None:
            continue
        mover, found = claim
        try:
            _release(instance, found, claimed_as=instance.task_state)
        except exception.UnexpectedTaskStateError:
            continue  # the mover moved it meanwhile: it is no longer homed here
        LOG.warning("instance %s: the move claimed by %s never happened; this service is "
                    "back: task state %s given back", instance.uuid, mover, found)


def move_instance(ctxt, instance, fenced_host, members=(), claimed=lambda: None):
    """Step 4: whether the server moved here (False: another mover moved it first or
    holds it).  nova's UnexpectedTaskStateError: another mover, or nova, changed it
    meanwhile.  ``members``: the live members (a claim of one of them is its);
    ``claimed``: called once the claim is written, before the move's write."""
    me = CONF.host
    claim = claim_of(instance)
    if claim is not None:  # a mover's claim: its own, or one left by a mover that died
        mover, found = claim
        if mover.lower() != me.lower() and mover.lower() in members:
            return False  # a live mover is moving it
        LOG.warning("instance %s: finishing the move claimed by %s", instance.uuid, mover)
    else:
        found = instance.task_state
        instance.task_state = CLAIM_STATE
        instance.system_metadata[CLAIM_KEY] = f"{me} {found or ''}".strip()
        instance.save(expected_task_state=[found])
        claimed()
        instance = objects.Instance.get_by_uuid(ctxt, instance.uuid,
                                                expected_attrs=["system_metadata"])
        if instance.host != fenced_host or claim_of(instance) != (me, found):
            if instance.host != fenced_host:  # moved before the claim: give it back
                _release(instance, found, claimed_as=CLAIM_STATE)
            return False
    _release(instance, found, claimed_as=instance.task_state, host=me)
    return True


def _release(instance, found, claimed_as, host=None):
    """End the claim on ``instance`` by a compare-and-swap on its task state
    ``claimed_as``: the task state the mover found is the server's again, and (a move)
    its host is ``host``."""
    instance.task_state = found
    instance.system_metadata.pop(CLAIM_KEY, None)
    if host is not None:
        instance.host = host
    instance.save(expected_task_state=[claimed_as])

