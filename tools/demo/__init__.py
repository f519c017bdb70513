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

"""The demos: the agents at work on the real services, shown step by step.

    tox -e demo         # python -m tools.demo.agents: three agents on a hash ring
    tox -e demo-nova    # python -m tools.demo.nova: the same with a whole nova in front

agents.py and nova.py are the two demos, common.py what they share."""
