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

"""What every service module shares: child processes, loopback ports, readiness
checks, and the stack's own virtualenv and Debian packages."""

import configparser
import contextlib
import fcntl
import functools
import json
import os
import pathlib
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request

from bindep import depends

from tools import wait
from tools.localstack import releases


def stack_venv():
    """The current release's stack virtualenv (RP_STACK_VENV overrides it)."""
    return os.environ.get("RP_STACK_VENV") or os.path.expanduser(
        f"~/.cache/rp_reporter/stack-venv{releases.venv_suffix()}")


def stack_packages():
    """The release's Placement and Ironic (releases.py), and gunicorn to serve them.
    A service's VENV_PACKAGES go into the same virtualenv only when a profile runs it
    (they co-install with these without changing any of their pins)."""
    return releases.pins("openstack-placement", "ironic", "gunicorn")


# What stack_packages() put in the virtualenv's bin/: when one is missing, they are installed.
STACK_COMMANDS = ("ironic", "placement-manage", "gunicorn")


# gunicorn's arguments for every service behind it: its threaded worker, and idle
# kept-alive connections kept for 5 minutes, not 2 s.  Clients (keystonemiddleware
# validating tokens, nova's clients) reuse pooled connections with no idle limit of
# their own, so a 2 s server-side close raced their reuse: a token validation then
# failed with "Connection aborted" and Placement answered nova's scheduler 503.
GUNICORN = ("-k", "gthread", "--keep-alive", "300")


def serve_wsgi(service, port, gunicorn, app, conf_dir, env, workers, after_import=""):
    """Serve the WSGI application ``app`` ("module:name") under ``gunicorn`` on loopback
    ``port`` as ``service`` (a Service), through a shim module in ``conf_dir``: these
    applications parse sys.argv with oslo.config, which refuses gunicorn's arguments,
    so the shim hides them before the import; ``after_import`` is more shim code."""
    module, name = app.split(":")
    shim = f"{service.name.replace('-', '_')}_wsgi"
    with open(os.path.join(conf_dir, f"{shim}.py"), "w") as f:
        f.write(f"import sys\nsys.argv = sys.argv[:1]\n"
                f"from {module} import {name}  # noqa: E402,F401\n{after_import}")
    service.spawn([gunicorn, *GUNICORN, *workers, "--pythonpath", conf_dir,
                   "-b", f"127.0.0.1:{port}", f"{shim}:{name}"], env)


def log(msg):
    print(f"[localstack] {msg}", file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def http_ok(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=2) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as e:
        return e.code < 500


def ini(sections):
    """An ini file's text: {section: {option: value}}, in order."""
    return "".join(f"[{name}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items()) + "\n"
                   for name, values in sections.items())


def update_ini(path, sections):
    """Set options of an ini file in place: {section: {option: value}}, a value of None
    taking the option away (the service's own default again)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    for section, values in sections.items():
        if section != "DEFAULT" and not parser.has_section(section):
            parser.add_section(section)
        for option, value in values.items():
            if value is None:
                parser.remove_option(section, option)
            else:
                parser.set(section, option, str(value))
    with open(path, "w") as f:
        parser.write(f)


def wait_until(check, timeout, what, interval=0.2):
    """The monotonic time ``check()`` first held (tools.wait.wait_for; an exception
    counts as not yet: the service may not answer yet); RuntimeError naming ``what``
    after ``timeout`` seconds."""
    try:
        return wait.wait_for(check, timeout, what, interval, ignore=Exception)
    except wait.NotSeen:
        raise RuntimeError(f"{what} did not come up within {timeout} s") from None


def wal(db_path):
    """WAL journaling: readers no longer block the writer, so far fewer
    "database is locked" answers from a service on sqlite (persists in the file)."""
    with contextlib.closing(sqlite3.connect(db_path)) as db:
        db.execute("PRAGMA journal_mode=WAL")


def venv_bin(name):
    return os.path.join(stack_venv(), "bin", name)


def venv_has(module):
    return subprocess.run([venv_bin("python"), "-c", f"import {module}"],
                          capture_output=True).returncode == 0


@contextlib.contextmanager
def install_lock():
    """Held while installing: an exclusive lock on a file beside the stack's virtualenv."""
    os.makedirs(os.path.dirname(stack_venv()), exist_ok=True)
    with open(stack_venv() + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@functools.cache
def bindep():
    """The system packages of each service: bindep.txt, a profile a service."""
    return depends.Depends((pathlib.Path(__file__).parents[2] / "bindep.txt").read_text())


def missing_system_packages(profiles):
    """bindep.txt's packages of these profiles (and of this platform) not installed here."""
    rules = bindep().active_rules(bindep().platform_profiles() + list(profiles))
    return [name for kind, names in bindep().check_rules(rules) if kind == "missing"
            for name in names]


def install_missing(profiles, venv_extras):
    """Install what is not there yet (idempotent).

    ``profiles``: the services whose system packages (bindep.txt) must be installed,
    with apt-get or dnf.  ``venv_extras``: (packages, a check that they are installed)
    to add to the stack's virtualenv, whose stack_packages() are installed first (the
    checks run in it)."""
    missing = missing_system_packages(profiles)
    if missing:
        log(f"installing {' '.join(missing)} (bindep.txt)")
        if "platform:dpkg" in bindep().platform_profiles():
            env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
            subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
            subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True,
                           env=env, stdout=subprocess.DEVNULL)
        else:
            subprocess.run(["dnf", "install", "-y", "-q", *missing], check=True,
                           stdout=subprocess.DEVNULL)
    if not all(os.path.exists(venv_bin(b)) for b in STACK_COMMANDS) or not venv_current(
            stack_venv(), stack_packages()):
        venv_install(stack_venv(), stack_packages(), create=True)
    extra = [pkg for packages, installed in venv_extras if not installed() for pkg in packages]
    if extra:
        # With stack_packages() again, so the installer keeps their pins.
        venv_install(stack_venv(), (*stack_packages(), *extra))


def venv_install(venv, packages, create=False):
    """Install ``packages`` into the virtualenv ``venv`` (made first when ``create``),
    with uv where it is installed (the test extras bring it: about ten times pip's
    speed on a fresh machine), else with the virtualenv's pip; an older release's
    libraries under its constraints file (releases.installer_options())."""
    log(f"installing {' '.join(packages)} into {venv}")
    if create:
        make_venv(venv)
    python = os.path.join(venv, "bin", "python")
    installer = uv()
    command = ([installer, "pip", "install", "--quiet", "--python", python] if installer
               else [python, "-m", "pip", "install", "-q"])
    subprocess.run([*command, *releases.installer_options(), *packages], check=True)
    installed = set(packages) | (set() if create else set(_record(venv)["packages"]))
    with open(os.path.join(venv, INSTALLED), "w") as f:
        json.dump({"constraints": releases.constraints_file().read_text(),
                   "packages": sorted(installed)}, f)


# What a virtualenv was installed with, kept in it: the constraints file and the
# requirements asked.  A virtualenv cached from other pins, or without a package a
# module now needs, is made again, so a machine with an old cache tests what a new one
# builds.
INSTALLED = "rp-reporter-installed.json"


def _record(venv):
    try:
        with open(os.path.join(venv, INSTALLED)) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return {"constraints": None, "packages": []}


def base_python():
    """This Python's own interpreter, outside any virtualenv it runs in: what a cached
    virtualenv is made from.  Python 3.9 and 3.10 make a virtualenv from inside another
    on the outer one's interpreter (their sys._base_executable is sys.executable there),
    so a stack made from a tox environment lost its Python with that environment's
    clone (CI's nova-cloud-2025.1: "No such file or directory: .../bin/python")."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for prefix in (sys.base_exec_prefix, sys.base_prefix):
        candidate = os.path.join(prefix, "bin", version)
        if os.path.exists(candidate):
            return candidate
    return sys.executable


def make_venv(venv):
    """A new virtualenv at ``venv`` (whatever was there removed), on base_python()."""
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([base_python(), "-m", "venv", venv], check=True)


def venv_current(venv, packages=()):
    """Whether ``venv`` still has its interpreter and was installed under the current
    release's constraints file, with each of the requirements ``packages``."""
    if not os.path.exists(os.path.join(venv, "bin", "python")):  # dangling: made from a
        return False                                             # Python since removed
    record = _record(venv)
    return (record["constraints"] == releases.constraints_file().read_text()
            and set(packages) <= set(record["packages"]))


def uv():
    """uv's executable, or None."""
    try:
        import uv as package
        return package.find_uv_bin()
    except (ImportError, FileNotFoundError):
        return shutil.which("uv")


class Service:
    """One child process in its own session, so stop() takes its workers too."""

    def __init__(self, name, workdir):
        self.name = name
        self.workdir = workdir
        self.proc = None

    def spawn(self, argv, env=None):
        logf = open(os.path.join(self.workdir, f"{self.name}.log"), "ab")
        self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=logf, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})), start_new_session=True)
        logf.close()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, timeout=15):
        stop_all([self], timeout)


def stop_all(services, timeout=15):
    """SIGTERM every service still running, then wait for each (SIGKILL ``timeout``
    seconds after the signal): they shut down side by side, not one after another."""
    running = [s for s in services if s.running()]
    for service in running:
        service.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for service in running:
        try:
            service.proc.wait(max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            service.signal(signal.SIGKILL)
            service.proc.wait(5)


def terminate(procs, timeout=15):
    """SIGTERM every process still running, then wait for each (agents stop cleanly)."""
    running = [p for p in procs if p is not None and p.poll() is None]
    for proc in running:
        proc.send_signal(signal.SIGTERM)
    for proc in running:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{' '.join(map(str, proc.args))[:120]}: no exit {timeout} s after SIGTERM; killed")
            proc.kill()
            proc.wait()


def exit_on_sigterm():
    """SIGTERM unwinds like Ctrl-C, so the stacks' ``finally`` blocks stop what they
    started (by default it ends the process there and leaves every service running)."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
