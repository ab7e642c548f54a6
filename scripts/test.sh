#!/usr/bin/env bash
# The whole test suite: make sure etcd is installed, type-check, lint, bundle, run vitest, print one closing line.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-etcd.sh || exit 1
# The real kube-apiserver and kubectl (test/e2e/real-apiserver.test.ts): built from the Go module
# proxy once per version in scripts/versions.env; without Go the suite fails here, it never skips.
kube_bin=$(bash scripts/ensure-kube.sh) || { echo "tests: scripts/ensure-kube.sh failed: the real kube-apiserver suite needs Go and the Go module proxy (README, Try it)"; exit 1; }
export ETCD_GUARD_KUBE_BIN_DIR="$kube_bin"
echo "tests: $("$kube_bin/kube-apiserver" --version | sed 's/^Kubernetes/kube-apiserver/'), kubectl $("$kube_bin/kubectl" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)".*/\1/p' | head -1) ($kube_bin)"
# etcd 3.5 (Debian trixie's), 3.6 and 3.7 (built from their Go modules) for the in-place upgrade
# suites (test/e2e/etcd-upgrade-in-place*.test.ts) and the downgrade suite: fetched or built once into
# the cache, like the kube binaries.
etcd35_bin=$(bash scripts/ensure-etcd-3.5.sh) && etcd36_bin=$(bash scripts/ensure-etcd-go.sh 3.6) &&
  etcd37_bin=$(bash scripts/ensure-etcd-go.sh 3.7) ||
  { echo "tests: scripts/ensure-etcd-3.5.sh or ensure-etcd-go.sh 3.6|3.7 failed: the in-place upgrade suites need Debian's archive, Go and the Go module proxy (README, Try it)"; exit 1; }
export ETCD_GUARD_ETCD35_BIN_DIR="$etcd35_bin" ETCD_GUARD_ETCD36_BIN_DIR="$etcd36_bin" ETCD_GUARD_ETCD37_BIN_DIR="$etcd37_bin"
etcd_version() { "$1/etcd" --version | sed -n 's/^etcd Version: //p'; }
echo "tests: in-place upgrades from etcd $(etcd_version "$etcd35_bin") ($etcd35_bin) to $(etcd_version "$etcd36_bin") ($etcd36_bin) to $(etcd_version "$etcd37_bin") ($etcd37_bin)"
# npm scripts put node_modules/.bin first on the PATH, where the devDependency `node` (Node 22 LTS)
# is: tsc, eslint, vitest (and its forked workers), tsx and the CLI run on it whatever node started
# npm. Printed so the CI log shows it; test/project/node-runtime.test.ts fails when it is not so.
echo "tests: node $(node --version) ($(command -v node)); tsx on $(node_modules/.bin/tsx -e 'process.stdout.write(process.version)')"
npx tsc --noEmit || { echo "tests: type-check failed"; exit 1; }
npx eslint . || { echo "tests: lint failed"; exit 1; }
npx prettier --check . >/dev/null || { npx prettier --check .; echo "tests: formatting differs (run npm run format)"; exit 1; }
# The CLI tests run bin/etcd-guard.mjs as installed: the bundle, built from these sources.
node scripts/build.mjs >/dev/null || { echo "tests: bundle build failed"; exit 1; }
report=$(mktemp /tmp/etcd-guard-vitest.XXXXXX.json)
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "$@"
status=$?
node scripts/test-summary.mjs "$report" || status=1
rm -f "$report"
exit $status
