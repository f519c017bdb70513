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

"""nova's own cell database for the state handling's tests (nova's test fixture: the
real schema on sqlite), so nova's real Instance objects save by their compare-and-swap."""

import nova.conf
import pytest
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures

CONF = nova.conf.CONF


@pytest.fixture
def cell():
    """nova's cell database (its fixture: the real schema on sqlite); an admin context."""
    CONF([], project="nova")
    objects.register_all()
    CONF.set_override("connection", "sqlite://", group="database")
    database = nova_fixtures.Database(database="main")
    database.setUp()
    try:
        yield nova_context.get_admin_context()
    finally:
        database.cleanUp()
        CONF.clear_override("connection", group="database")
        CONF.reset()
