#!/usr/bin/env bash
# Installs what the tests and the demo need from Debian when it is absent: etcd-server and
# etcd-client (real etcd members) and prometheus (its promtool checks and unit-tests the shipped
# alerting rules; test/e2e/observability.test.ts fails without it).
set -euo pipefail
packages=()
if ! command -v etcd >/dev/null 2>&1 || ! command -v etcdctl >/dev/null 2>&1; then
  packages+=(etcd-server etcd-client)
fi
if ! command -v promtool >/dev/null 2>&1; then
  packages+=(prometheus)
fi
if [ "${#packages[@]}" -eq 0 ]; then
  exit 0
fi
echo "etcd-guard: installing Debian's ${packages[*]}" >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${packages[@]}" >/dev/null
# The packages enable system services (etcd, prometheus); the project never uses them.
for service in etcd prometheus; do
  $SUDO systemctl disable --now "$service" >/dev/null 2>&1 || true
done
command -v etcd >/dev/null && command -v etcdctl >/dev/null && command -v promtool >/dev/null
