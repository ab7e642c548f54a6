// Child process for the fleet bench: the scheduled function over COUNT targets (one local cluster
// under COUNT names) with its concurrency limit, evaluations written to a file store. Reports
// wall time and its own peak RSS over IPC, so RSS is the fleet run's alone.
import { createStore } from '../functions/adapters/store-factory.js';
import { parseGuardConfig } from '../functions/domain/config.js';
import { evaluateTarget } from '../functions/usecases/evaluate-target.js';
import { runScheduledEvaluation } from '../functions/usecases/scheduled-run.js';
import { peakRssMiB } from './lib.js';

const [countText, concurrencyText, endpointsText, caFile, certFile, keyFile, storeDir] = process.argv.slice(2);
const count = Number(countText);
const concurrency = Number(concurrencyText);
if (!(count > 0) || !(concurrency > 0) || !endpointsText || !caFile || !certFile || !keyFile || !storeDir) {
  process.stderr.write('usage: fleet-child.ts COUNT CONCURRENCY ENDPOINTS CA CERT KEY STORE_DIR\n');
  process.exit(2);
}
const endpoints = endpointsText.split(',');
const config = parseGuardConfig(
  {
    store: { kind: 'file', dir: storeDir },
    concurrency,
    targets: Array.from({ length: count }, (_unused, index) => ({
      name: `fleet-${String(index).padStart(3, '0')}`,
      endpoints,
      tls: { caFile, certFile, keyFile },
      timeout: '2s',
    })),
  },
  'fleet bench',
);
const silent = { info: () => undefined, error: () => undefined };
const rssBefore = peakRssMiB('self');
const started = performance.now();
const results = await runScheduledEvaluation({
  config,
  store: createStore(config.store),
  evaluate: evaluateTarget,
  logger: silent,
});
const wallMs = performance.now() - started;
const perTarget = results.map((result) => result.durationMs).sort((a, b) => a - b);
process.send?.({
  wallMs,
  peakRssMiB: peakRssMiB('self'),
  memoryAfter: process.memoryUsage(),
  rssBeforeMiB: rssBefore,
  ok: results.filter((result) => result.ok).length,
  passed: results.filter((result) => result.passed === true).length,
  errors: [...new Set(results.flatMap((result) => (result.ok ? [] : [result.error])))].slice(0, 3),
  p50TargetMs: perTarget[Math.floor(perTarget.length / 2)] ?? 0,
  maxTargetMs: perTarget[perTarget.length - 1] ?? 0,
});
// Let the IPC message flush before exiting.
process.disconnect?.();
