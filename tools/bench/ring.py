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

"""ring: balance and movement of the hash ring as members come and go."""

import random
import time
import uuid

from tools.bench import common


def run(args):
    from rp_reporter import ring
    rng = random.Random(2026)
    results = []
    for count in (10_000, 100_000):
        nodes = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(count)]
        for before, after in ((3, 4), (4, 3), (8, 9)):
            started = time.monotonic()
            old = ring.Ring([f"agent-{i}" for i in range(before)], partitions=args.partitions)
            new = ring.Ring([f"agent-{i}" for i in range(after)], partitions=args.partitions)
            moved = ring.movement(old, new, nodes)
            ideal = 1 / max(before, after)
            results.append({
                "nodes": count, "members": f"{before}->{after}",
                "balance_max_mean": round(ring.balance(new, nodes), 3),
                "moved": round(moved, 4), "ideal": round(ideal, 4),
                "moved_vs_ideal": round(moved / ideal, 3),
                "seconds": round(time.monotonic() - started, 2)})
    print(f"tooz hash ring, sha256, {args.partitions} partitions per member")
    common.print_table(results, ("members", "nodes", "balance_max_mean", "moved", "ideal",
                                 "moved_vs_ideal", "seconds"))
    common.save(results, "ring")
    return results
