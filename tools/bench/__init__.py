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

"""Benchmarks on the real local stack: ``python -m tools.bench`` (see __main__.py),
and the two soaks, commands of their own (``python -m tools.bench.soak``,
``python -m tools.bench.fault_soak``).

One module per benchmark, each importing common.py (scale.py also uses the fleet,
compare and latency benchmarks' parts); the entry point imports them, the soaks
aside; report.py writes the summary and the plots.  Each saves its JSON in
bench-results/ (common.save)."""
