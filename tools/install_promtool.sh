#!/usr/bin/env bash
# promtool for `tox -e monitoring`: Debian's prometheus package provides it
# (about 40 s with the apt-get update on a busy 2-core machine; nothing when present).
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "promtool missing: install Debian's prometheus package (apt-get install prometheus)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool
