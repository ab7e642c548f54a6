#!/usr/bin/env bash
# The real-etcd suites (faults, TLS and TLS identity, learner, alarms, removed and foreign members,
# leader moves and leader-changes, fragmentation, consistency (and through the webhook), watch probe, CAPI reach and fleet e2e, the webhook and its upgrade gate
# and druid backup rule, issue 27's race of a shrink against a member fault (live evidence),
# the real kube-apiserver suite with its storage on the same etcd) against
# one etcd: ETCD_GUARD_ETCD_BIN_DIR names the dir holding its etcd and etcdctl (PATH's otherwise).
# `.ci/run` runs them again on etcd 3.5 (scripts/ensure-etcd-3.5.sh), 3.6 and 3.7
# (scripts/ensure-etcd-go.sh) after `npm test`.
set -uo pipefail
cd "$(dirname "$0")/.."
files=(
  functions/usecases/evaluate-target.test.ts
  functions/usecases/etcd-access.test.ts
  test/e2e/etcd-removed-member.test.ts
  test/e2e/etcd-foreign-member.test.ts
  test/e2e/etcd-churn.test.ts
  test/e2e/etcd-leader-changes.test.ts
  test/e2e/etcd-fragmentation.test.ts
  test/e2e/etcd-consistency.test.ts
  test/e2e/etcd-consistency-webhook.test.ts
  test/e2e/etcd-watch-probe.test.ts
  test/e2e/tls-identity.test.ts
  test/e2e/capi-reach.test.ts
  test/e2e/fleet.test.ts
  test/e2e/webhook-etcd.test.ts
  test/e2e/etcd-upgrade-gate.test.ts
  test/e2e/druid-backup.test.ts
  test/e2e/etcd-version-features.test.ts
  test/e2e/real-apiserver.test.ts
  test/e2e/issue-27-live-evidence.test.ts
)
etcd="${ETCD_GUARD_ETCD_BIN_DIR:+$ETCD_GUARD_ETCD_BIN_DIR/}etcd"
echo "real-etcd suites on: $("$etcd" --version | head -1) ($etcd); $("${etcd}ctl" version | head -1)"
report=$(mktemp /tmp/etcd-guard-vitest.XXXXXX.json)
npx vitest run --reporter=default --reporter=json --outputFile.json="$report" "${files[@]}" "$@"
status=$?
node scripts/test-summary.mjs "$report" || status=1
rm -f "$report"
exit $status
