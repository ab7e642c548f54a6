// The guard config embedded in the base: it parses with the schema and uses only documented keys.
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { configReferenceRows } from '../../scripts/config-reference.js';
import { at, configMap, guardConfig, guardNamespace, isObj } from '../harness/manifests.js';

describe('the embedded config', () => {
  it('parses with the guard config schema and stores evaluations in the guard namespace', () => {
    expect(guardConfig().store).toEqual({ kind: 'configmap', namespace: guardNamespace });
    expect(guardConfig().maxAgeSeconds).toBe(120);
    expect(guardConfig().inlineRefresh).toBe(true);
  });

  it('every key it uses is in the configuration reference', () => {
    const documented = new Set(configReferenceRows().map((row) => row.path));
    const used: string[] = [];
    const collect = (value: unknown, prefix: string): void => {
      if (Array.isArray(value)) {
        for (const item of value) if (isObj(item)) collect(item, `${prefix}[]`);
      } else if (isObj(value)) {
        for (const [key, child] of Object.entries(value)) {
          const keyPath = prefix === '' ? key : `${prefix}.${key}`;
          used.push(keyPath);
          if (!keyPath.endsWith('labelSelector')) collect(child, keyPath);
        }
      }
    };
    collect(parseYaml(String(at(configMap, 'data', 'config.yaml'))), '');
    expect(used.length).toBeGreaterThan(5);
    expect(used.filter((key) => !documented.has(key))).toEqual([]);
  });
});
