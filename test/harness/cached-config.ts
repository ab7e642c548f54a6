// A webhook config on a file store holding one stored evaluation per target and no reachable
// etcd (decisions come from the cache): for suites and benches about the server itself, where
// what a review is judged on does not matter, only that it is answered.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Evaluation } from '../../functions/domain/evaluation-document.js';
import { makeEvaluation } from './evaluation-fixture.js';

export interface CachedTarget {
  name: string;
  /** The target's `match` as YAML flow text; `{}` (everything) by default. */
  match?: string;
  evaluation?: Partial<Evaluation>;
}

/** Writes `<dir>/store/<target>.json` for each target and `<dir>/guard.yaml`; returns the config file. */
export async function writeCachedConfig(dir: string, targets: readonly CachedTarget[]): Promise<string> {
  const storeDir = path.join(dir, 'store');
  await mkdir(storeDir, { recursive: true });
  await Promise.all(
    targets.map((target) =>
      writeFile(
        path.join(storeDir, `${target.name}.json`),
        JSON.stringify(makeEvaluation({ target: target.name, ...target.evaluation })),
      ),
    ),
  );
  const configFile = path.join(dir, 'guard.yaml');
  await writeFile(
    configFile,
    [
      `store: { kind: file, dir: ${storeDir} }`,
      'maxAgeSeconds: 3600',
      'inlineRefresh: false',
      'events: false',
      'targets:',
      ...targets.flatMap((target) => [
        `  - name: ${target.name}`,
        '    endpoints: [https://127.0.0.1:9]',
        `    match: ${target.match ?? '{}'}`,
      ]),
      '',
    ].join('\n'),
  );
  return configFile;
}
