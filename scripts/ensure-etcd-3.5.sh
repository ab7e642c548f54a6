#!/usr/bin/env bash
# Puts etcd 3.5 beside the system's etcd without replacing it: Debian trixie's etcd-server and
# etcd-client packages, fetched with apt-get download through a throwaway sources list and
# unpacked with dpkg -x into a cache dir. Prints the dir holding etcd and etcdctl on stdout; the
# test harness takes it as ETCD_GUARD_ETCD_BIN_DIR. Idempotent: a second run only checks the
# binaries (a few ms). Debian's registry is the only source; nothing is installed system-wide.
set -euo pipefail
SUITE="${ETCD_GUARD_ETCD35_SUITE:-trixie}"
CACHE="${ETCD_GUARD_ETCD35_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-guard/etcd-3.5}"
BIN="$CACHE/root/usr/bin"

# The output is read whole before grep: `etcd --version | grep -q` under pipefail fails whenever
# grep exits before etcd wrote its last line (etcd then dies of SIGPIPE), which load decides.
is_35() {
  local says
  [ -x "$BIN/etcd" ] && [ -x "$BIN/etcdctl" ] && says=$("$BIN/etcd" --version 2>/dev/null) && grep -q '^etcd Version: 3\.5\.' <<<"$says"
}

if is_35; then
  echo "$BIN"
  exit 0
fi

echo "etcd-guard: fetching etcd 3.5 (Debian $SUITE etcd-server, etcd-client) into $CACHE" >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/etcd-guard-etcd35.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/debs"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
echo "deb [signed-by=$keyring] http://deb.debian.org/debian $SUITE main" >"$work/sources.list"
apt_opts=(
  -o "Dir::Etc::SourceList=$work/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$work/lists"
  -o "Dir::Cache=$work/cache"
  -o "APT::Sandbox::User=root"
  -qq
)
apt-get "${apt_opts[@]}" update >&2
(cd "$work/debs" && apt-get "${apt_opts[@]}" download etcd-server etcd-client >&2)
rm -rf "$CACHE/root.new"
mkdir -p "$CACHE/root.new"
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$CACHE/root.new"; done
# Swap in whole, so an interrupted run never leaves a half-unpacked tree that looks installed.
rm -rf "$CACHE/root"
mv "$CACHE/root.new" "$CACHE/root"
if ! is_35; then
  echo "etcd-guard: $BIN/etcd is not etcd 3.5 after unpacking Debian $SUITE's packages" >&2
  exit 1
fi
echo "$BIN"
