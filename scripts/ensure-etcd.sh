#!/usr/bin/env bash
# Installs Debian's etcd-server and etcd-client when etcd is absent; the tests and the demo start
# real etcd members and cannot run without them.
set -euo pipefail
if command -v etcd >/dev/null 2>&1 && command -v etcdctl >/dev/null 2>&1; then
  exit 0
fi
echo "etcd-guard: etcd not found, installing Debian's etcd-server and etcd-client" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server etcd-client >/dev/null
# The package enables a system etcd service; the project never uses it.
$SUDO systemctl disable --now etcd >/dev/null 2>&1 || true
command -v etcd >/dev/null && command -v etcdctl >/dev/null
