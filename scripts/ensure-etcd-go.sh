#!/usr/bin/env bash
# Builds etcd and etcdctl 3.6 or 3.7 from their Go modules (go.etcd.io/etcd/server/v3 and
# go.etcd.io/etcd/etcdctl/v3 at the version scripts/versions.env pins) into a cache dir keyed by
# version, and prints the dir holding them on stdout, as scripts/ensure-etcd-3.5.sh does; the test
# harness takes it as ETCD_GUARD_ETCD_BIN_DIR. Those modules' own go.mod files replace their
# sibling modules with local paths, which only hold inside etcd's repository, so they are built
# through a small wrapper module generated in the cache dir (etcd's main.go is a one-line call
# of etcdmain.Main; etcdctl's main package is built as a `tool` of the wrapper). Nothing of etcd
# is committed here. Idempotent: a second run only checks the binaries' versions.
#   usage: ensure-etcd-go.sh 3.6|3.7|vX.Y.Z
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
case "${1:-}" in
  3.6) version="$ETCD36_VERSION" ;;
  3.7) version="$ETCD37_VERSION" ;;
  v3.[0-9]*.[0-9]*) version="$1" ;;
  *)
    echo "usage: $0 3.6|3.7|vX.Y.Z (the pinned etcd 3.6 or 3.7 from scripts/versions.env, or a version)" >&2
    exit 2
    ;;
esac
CACHE="${ETCD_GUARD_ETCD_GO_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-guard/etcd}/$version"
BIN="$CACHE/bin"
plain="${version#v}"

# The output is read whole before grep: `etcd --version | grep -q` under pipefail fails whenever
# grep exits before etcd wrote its last line (etcd then dies of SIGPIPE), which load decides.
is_built() {
  local etcd_says etcdctl_says
  [ -x "$BIN/etcd" ] && [ -x "$BIN/etcdctl" ] &&
    etcd_says=$("$BIN/etcd" --version 2>/dev/null) && etcdctl_says=$("$BIN/etcdctl" version 2>/dev/null) &&
    grep -qx "etcd Version: $plain" <<<"$etcd_says" && grep -qx "etcdctl version: $plain" <<<"$etcdctl_says"
}

if is_built; then
  echo "$BIN"
  exit 0
fi

fail() {
  echo "etcd-guard: $*" >&2
  exit 1
}
command -v go >/dev/null 2>&1 ||
  fail "building etcd $version needs Go (the etcd modules' go.mod names the minimum) and the Go module proxy: no \`go\` on PATH"

started=$(date +%s)
modules=("go.etcd.io/etcd/server/v3@$version" "go.etcd.io/etcd/etcdctl/v3@$version")
echo "etcd-guard: building etcd $version and etcdctl from ${modules[*]} with $(go env GOVERSION) into $CACHE" >&2
# The download alone first, so a missing proxy or an unserved version says so plainly.
if ! fetched=$(GOFLAGS=-mod=mod go mod download -json "${modules[@]}" 2>&1); then
  reason=$(printf '%s\n' "$fetched" | sed -n 's/^[[:space:]]*"Error": "\(.*\)",\{0,1\}$/\1/p' | head -3)
  fail "cannot fetch ${modules[*]} through the Go module proxy (GOPROXY=$(go env GOPROXY)): ${reason:-$fetched}"
fi

mkdir -p "$CACHE"
# One build per version at a time (CI and a developer's npm test may start together); whoever
# waited finds it built.
exec 9>"$CACHE/.lock"
flock 9
if is_built; then
  echo "$BIN"
  exit 0
fi
work=$(mktemp -d "$CACHE/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/etcd" "$work/bin"
cat >"$work/go.mod" <<MOD
module etcd-guard.invalid/etcd-build

go 1.21
MOD
# The same main as etcd's own (its repository root's main.go).
cat >"$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(
  cd "$work"
  export GOWORK=off GOFLAGS=-mod=mod
  # go get raises the wrapper's go line to the modules' own minimum; GOTOOLCHAIN decides what then.
  go get "go.etcd.io/etcd/server/v3@$version" 2>&1
  go get -tool "go.etcd.io/etcd/etcdctl/v3@$version" 2>&1
  go mod tidy 2>&1
  go build -trimpath -o bin/etcd ./etcd 2>&1
  go build -trimpath -o bin/etcdctl go.etcd.io/etcd/etcdctl/v3 2>&1
) >"$work/build.log" || {
  cat "$work/build.log" >&2
  fail "building etcd $version failed (output above)"
}
# Swap in whole, so an interrupted build never leaves binaries that look built; the wrapper
# module stays beside them for whoever wants to see how they were made.
rm -rf "$CACHE/bin" "$CACHE/wrapper"
mv "$work/bin" "$CACHE/bin"
rm -f "$work/build.log"
mv "$work" "$CACHE/wrapper"
trap - EXIT
is_built || fail "$BIN does not hold etcd and etcdctl $plain after the build"
echo "etcd-guard: built etcd $version in $(( $(date +%s) - started ))s" >&2
echo "$BIN"
