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

"""What every benchmark shares: the stack it measures on, the nodes it loads into
Ironic, the reporter's configuration, and how figures are printed and saved."""

import concurrent.futures
import json
import os
import time
import uuid

from rp_reporter import conf as rp_conf
from rp_reporter import wiring
from tools import clients
from tools import localstack
from tools.localstack import mariadb

# Every contender runs against the same kind of Placement: MariaDB with several
# gunicorn workers by default (the shape operators run), sqlite with one worker
# thread under --database sqlite (the embedded test stack).  Auth is noauth for
# every contender: Keystone would add the same token validation to each.
DATABASE = "mariadb"


def use_database(name):
    """Every stack this run starts from now on puts Placement and Ironic on ``name``."""
    global DATABASE
    DATABASE = name


def new_stack(workdir=None):
    """A LocalStack of the kind this run measures (see DATABASE)."""
    return localstack.LocalStack(workdir, database=DATABASE)


def start(stack, names):
    """Start these services, and first the stack's own MariaDB when it has one."""
    stack.start((["mariadb"] if stack.database == "mariadb" else []) + list(names))


def load():
    """The machine's 1-minute load average now (recorded beside each figure)."""
    return round(os.getloadavg()[0], 2)


def _stat(pid):
    """The fields of /proc/PID/stat after the command name, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _cpu_s(fields):
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def peak_rss(pid="self"):
    """A process's peak RSS (VmHWM) in bytes.  Not ru_maxrss: that survives exec, so a
    child would start with its parent's peak."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def process_cpu(pid):
    """CPU seconds used so far by one process (0 once it is gone)."""
    fields = _stat(pid)
    return _cpu_s(fields) if fields else 0.0


def service_cpu(stack, name):
    """CPU seconds used so far by a stack's service: every process of its session
    (a gunicorn master and its workers), read from /proc."""
    group = stack.services[name].proc.pid
    return sum(_cpu_s(fields) for fields in map(_stat, filter(str.isdigit, os.listdir("/proc")))
               if fields and int(fields[3]) == group)  # its session's process group


def machine_cpu():
    """CPU seconds the whole machine has been busy (every core), from /proc/stat."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def loader_threads():
    """Ironic on MariaDB takes concurrent writes; on sqlite more threads only queue."""
    return 8 if DATABASE == "mariadb" else 4


def load_nodes(ironic, count, threads=None,
               classes=("baremetal-silver", "baremetal-gold", "baremetal-gold")):
    """Fast loader: one POST per node (enroll state), classes in turn, a trait on every tenth."""
    def create(i):
        return ironic.enroll(classes[i % len(classes)], ["CUSTOM_GPU"] if i % 10 == 0 else ())
    with concurrent.futures.ThreadPoolExecutor(threads or loader_threads()) as pool:
        return list(pool.map(create, range(count)))


TEMPLATES = 30  # load_nodes' pattern repeats every 30 nodes (3 classes, a trait every tenth)


def load_many(stack, ironic, count):
    """``count`` nodes in Ironic, as load_nodes makes them, faster on MariaDB.

    Ironic's API creates nodes slowly (one API process, whatever the client's
    concurrency): the larger sizes would spend minutes on loading alone, at each
    size.  On MariaDB the first TEMPLATES nodes go through the API and
    the rest are copies of their rows (copy_nodes).  On sqlite every node goes
    through the API."""
    if stack.database != "mariadb" or count <= TEMPLATES:
        return load_nodes(ironic, count)
    templates = load_nodes(ironic, TEMPLATES)
    return templates + [node for node, _ in copy_nodes(stack, templates, count - TEMPLATES)]


def _sql(stack, database):
    def sql(text):
        return mariadb.client(stack, text, database)

    def columns(table, *skip):
        names = [line.split("\t")[0] for line in sql(f"SHOW COLUMNS FROM {table}").splitlines()]
        return ", ".join(f"`{c}`" for c in names if c not in skip)
    return sql, columns


def _ids(sql, table, uuids):
    # Every value here is a uuid made by a service or by this module (no outside input).
    listed = ", ".join(f"'{u}'" for u in uuids)
    return dict(line.split("\t")[::-1] for line in sql(
        f"SELECT id, uuid FROM {table} WHERE uuid IN ({listed})").splitlines())  # noqa: S608


def _run_in_batches(sql, per_row, rows):
    statements = ["SET autocommit=0;"]
    for i, row in enumerate(rows, 1):
        statements += per_row(*row)
        if i % 1000 == 0:
            statements.append("COMMIT;")
    statements.append("COMMIT;")
    sql("\n".join(statements))


def copy_nodes(stack, templates, count):
    """``count`` new nodes in Ironic's database, copies of ``templates`` in turn (every
    column but id and uuid, their traits too): the records the API would list, without
    the create notifications nobody listens to yet.  Returns [(node, its template)]."""
    sql, columns = _sql(stack, "ironic")
    node_cols, trait_cols = columns("nodes", "id", "uuid"), columns("node_traits", "node_id")
    ids = _ids(sql, "nodes", templates)
    pairs = [(str(uuid.uuid4()), templates[i % len(templates)]) for i in range(count)]

    def copy(node, template):
        return [f"INSERT INTO nodes ({node_cols}, `uuid`) SELECT {node_cols}, '{node}' "  # noqa: S608
                f"FROM nodes WHERE id = {ids[template]};",
                f"INSERT INTO node_traits (`node_id`, {trait_cols}) SELECT "  # noqa: S608
                f"LAST_INSERT_ID(), {trait_cols} FROM node_traits WHERE node_id = {ids[template]};"]
    _run_in_batches(sql, copy, pairs)
    return pairs


def copy_providers(stack, pairs):
    """For each (node, template) in ``pairs``, a provider in Placement's database that is
    a copy of the template node's provider (generation, inventories, traits), named and
    keyed by the node's uuid as rp_reporter creates them: the providers the agents would
    have made, without the hours their creation through the API takes at 10^5."""
    sql, columns = _sql(stack, "placement")
    rp_cols = columns("resource_providers", "id", "uuid", "name", "root_provider_id",
                      "parent_provider_id")
    inv_cols = columns("inventories", "id", "resource_provider_id")
    trait_cols = columns("resource_provider_traits", "resource_provider_id")
    ids = _ids(sql, "resource_providers", {template for _, template in pairs})

    def copy(node, template):
        return [f"INSERT INTO resource_providers ({rp_cols}, `uuid`, `name`) SELECT "  # noqa: S608
                f"{rp_cols}, '{node}', '{node}' FROM resource_providers "
                f"WHERE id = {ids[template]};",
                "SET @rp = LAST_INSERT_ID();",
                "UPDATE resource_providers SET root_provider_id = @rp WHERE id = @rp;",
                f"INSERT INTO inventories (`resource_provider_id`, {inv_cols}) SELECT @rp, "  # noqa: S608
                f"{inv_cols} FROM inventories WHERE resource_provider_id = {ids[template]};",
                f"INSERT INTO resource_provider_traits (`resource_provider_id`, {trait_cols}) "  # noqa: S608
                f"SELECT @rp, {trait_cols} FROM resource_provider_traits "
                f"WHERE resource_provider_id = {ids[template]};"]
    _run_in_batches(sql, copy, pairs)


def figures(label, summary, nodes):
    writes = sum(n for m, n in summary.requests.items() if m != "GET")
    return {"pass": label, "nodes": nodes, "seconds": round(summary.seconds, 2),
            "writes": writes, "writes_per_node": round(writes / max(nodes, 1), 3),
            "reads": summary.requests.get("GET", 0), "requests": dict(summary.requests),
            "failed": len(summary.failures), "load": load()}


def confs(stack, workdir, shard, args=None, **reconcile):
    """(conf with [DEFAULT] state_path, as an operator configures it; the same without).

    ``args.workers`` / ``args.bulk_batch`` / ``args.reverify_passes`` (when given)
    and ``reconcile`` override the [reconcile] defaults."""
    for name in ("workers", "bulk_batch", "reverify_passes"):
        value = getattr(args, name, None)
        if value is not None:
            reconcile.setdefault(name, value)
    reconcile = {k: v for k, v in reconcile.items() if v is not None}
    state_dir = os.path.join(workdir, "state")
    os.makedirs(state_dir, exist_ok=True)
    result = []
    for name, default in (("rp.conf", {"state_path": state_dir}), ("rp-stateless.conf", {})):
        path = os.path.join(workdir, name)
        with open(path, "w") as f:
            f.write(stack.reporter_conf(DEFAULT=dict({"host": "rp-local"}, **default),
                                        ironic={"shard": shard},
                                        **({"reconcile": reconcile} if reconcile else {})))
        result.append(rp_conf.load(["--config-file", path]))
    return tuple(result)


def new_process(conf):
    """A pass of a new process (cron's `rp-reporter reconcile`, an agent restart): the
    reporter built from configuration (restoring its state file, if any), then one pass.
    Returns the pass's Summary, its seconds counting the build."""
    started = time.monotonic()
    summary = wiring.reconciler(conf).run()
    summary.seconds = time.monotonic() - started
    return summary


def print_table(rows, columns):
    print("  ".join(f"{c:>24}" if i == 0 else f"{c:>15}" for i, c in enumerate(columns)))
    for row in rows:
        print("  ".join(f"{row.get(c, '')!s:>24}" if i == 0 else f"{row.get(c, '')!s:>15}"
                        for i, c in enumerate(columns)), flush=True)


def markdown_table(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def save(results, name):
    path = os.path.join("bench-results", f"{name}.json")
    os.makedirs("bench-results", exist_ok=True)
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    print(f"saved {path}")


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def scrape(port, name):
    return {k: v for k, v in clients.metrics(port).items() if k.startswith(name)}
