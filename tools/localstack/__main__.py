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

"""Real OpenStack services on loopback, for the functional tests and the demo.

    python -m tools.localstack up [--profile production|nova-cloud] [--database ...] [--dir DIR]
    python -m tools.localstack install [--profile production|nova-cloud]
    python -m tools.localstack constraints [--release R]  # a release's constraints file, made again
    (each with --release 2025.1, 2025.2, 2026.1 or 2026.2: default the newest)

``up`` starts a stack, prints a ready rp_reporter config file and the services'
addresses as JSON, and waits for ^C (or SIGTERM), then stops it.
"""

import argparse
import json
import os
import shutil
import signal
import sys

from tools import localstack
from tools.localstack import releases


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.localstack",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "install", "constraints"])
    parser.add_argument("--dir", help="work directory (default: a new temporary one)")
    parser.add_argument("--profile", choices=list(localstack.PROFILES), default="embedded",
                        help="production: MariaDB + Keystone + etcd; nova-cloud: production with "
                             "Glance, Neutron and nova's controllers (the knobs below override)")
    for knob, choices in localstack.KNOBS.items():
        parser.add_argument(f"--{knob}", choices=list(choices))
    parser.add_argument("--release", choices=list(localstack.RELEASES),
                        help="the OpenStack release the services are of (default: "
                             "$RP_OPENSTACK_RELEASE, else the newest)")
    args = parser.parse_args(argv)
    if args.release:
        os.environ[releases.ENV] = args.release
    if args.action == "constraints":  # a release's (all of them by default)
        for name in [args.release] if args.release else list(localstack.RELEASES):
            print(releases.write_constraints(name))
        return 0
    shape = dict(localstack.PROFILES[args.profile])
    shape.update({k: getattr(args, k) for k in localstack.KNOBS if getattr(args, k)})
    localstack.install(**shape)
    if args.action == "install":
        return 0
    stack = localstack.LocalStack(args.dir and os.path.abspath(args.dir), **shape)
    localstack.exit_on_sigterm()
    try:
        stack.start()
        conf = os.path.join(stack.workdir, "rp_reporter.conf")
        with open(conf, "w") as f:
            f.write(stack.reporter_conf())
        shown = {"config_file": conf, "placement": stack.placement_url,
                 "ironic": stack.ironic_url, "transport_url": stack.transport_url,
                 "coordination": stack.coordination_url}
        if stack.auth == "keystone":
            shown["keystone"] = stack.keystone_url
            shown["credentials"] = {name: stack.credentials(name) for name in localstack.IDENTITIES}
        if stack.database == "mariadb":
            shown["mariadb"] = stack.mariadb
        if stack.nova == "cloud":  # nova-compute services: stack.start_compute()
            shown.update({name: stack.url(name) for name in ("nova", "glance", "neutron")})
        print(json.dumps(shown, indent=2), flush=True)
        while True:
            signal.pause()  # until SIGINT or SIGTERM unwinds to the finally below
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
        if not args.dir:
            shutil.rmtree(stack.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
