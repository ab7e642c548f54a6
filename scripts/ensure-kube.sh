#!/usr/bin/env bash
# Builds kube-apiserver and kubectl of scripts/versions.env's KUBE_VERSION from the Go module
# proxy, once, into a cache dir keyed by that version, and prints the dir holding both on stdout
# (the harness takes it as ETCD_GUARD_KUBE_BIN_DIR). k8s.io/kubernetes points its k8s.io/*
# staging modules at local paths, so the build goes through a throwaway wrapper module that
# requires it and pins every staging module its go.mod names to the matching v0.X.Y. A second
# run only checks the binaries' version. Prints one timing line on stderr either way.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source scripts/versions.env
CACHE="${ETCD_GUARD_KUBE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/etcd-guard/kube/$KUBE_VERSION}"
BIN="$CACHE/bin"
started=$(date +%s)

is_built() {
  [ -x "$BIN/kube-apiserver" ] && [ -x "$BIN/kubectl" ] &&
    [ "$("$BIN/kube-apiserver" --version 2>/dev/null)" = "Kubernetes $KUBE_VERSION" ]
}

if is_built; then
  echo "etcd-guard: kube-apiserver and kubectl $KUBE_VERSION cached in $BIN (checked in $(( $(date +%s) - started ))s)" >&2
  echo "$BIN"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "etcd-guard: building kube-apiserver and kubectl $KUBE_VERSION needs Go (1.24 or newer) on PATH and the Go module proxy; no 'go' found. Install Go (https://go.dev/dl/) and run this again." >&2
  exit 1
fi

echo "etcd-guard: building kube-apiserver and kubectl $KUBE_VERSION with $(go version | cut -d' ' -f3) into $BIN (several minutes on a cold Go build cache)" >&2
work=$(mktemp -d "${TMPDIR:-/tmp}/etcd-guard-kube.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Fetch k8s.io/kubernetes's own go.mod: its replace block lists the staging modules.
if ! download=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" 2>&1); then
  echo "etcd-guard: the Go module proxy ($(go env GOPROXY)) did not serve k8s.io/kubernetes@$KUBE_VERSION:" >&2
  echo "$download" >&2
  exit 1
fi
upstream_gomod=$(printf '%s\n' "$download" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
go_directive=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream_gomod")
staging_version="v0.${KUBE_VERSION#v1.}"
staging=$(sed -n 's|^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*$|\1|p' "$upstream_gomod")
if [ -z "$staging" ] || [ -z "$go_directive" ]; then
  echo "etcd-guard: $upstream_gomod names no staging modules (k8s.io/... => ./staging/src/...) or no go directive: cannot pin them" >&2
  exit 1
fi
{
  echo "module etcdguard.local/kube"
  echo
  echo "go $go_directive"
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  echo "replace ("
  for module in $staging; do echo "	$module => $module $staging_version"; done
  echo ")"
} >"$work/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kubectl"\n)\n' >"$work/tools.go"
if ! tidy=$(cd "$work" && go mod tidy 2>&1); then
  echo "etcd-guard: go mod tidy of the kube wrapper module failed (is the Go module proxy $(go env GOPROXY) reachable?):" >&2
  echo "$tidy" | tail -20 >&2
  exit 1
fi

# The version the binaries report (kubectl version, /version), as Kubernetes's own build stamps it.
minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ldflags="-s -w"
for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $package.gitVersion=$KUBE_VERSION -X $package.gitMajor=1 -X $package.gitMinor=$minor"
  ldflags+=" -X $package.gitTreeState=clean -X $package.buildDate=1970-01-01T00:00:00Z"
done
rm -rf "$CACHE/bin.new"
mkdir -p "$CACHE/bin.new"
(cd "$work" && go build -trimpath -ldflags="$ldflags" -o "$CACHE/bin.new/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
# Swap in whole, so an interrupted build never leaves a half-written dir that looks built.
rm -rf "$BIN"
mv "$CACHE/bin.new" "$BIN"
if ! is_built; then
  echo "etcd-guard: $BIN/kube-apiserver --version does not say Kubernetes $KUBE_VERSION after the build" >&2
  exit 1
fi
echo "etcd-guard: built kube-apiserver and kubectl $KUBE_VERSION in $(( $(date +%s) - started ))s" >&2
echo "$BIN"
