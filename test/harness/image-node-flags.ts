// The node flags the image starts etcd-guard with, read from the Dockerfile's ENTRYPOINT, and
// what they amount to under a given memory limit. Node turns --max-old-space-size-percentage
// into an old-generation cap from the cgroup limit it reads; a bench on a host without that
// cgroup passes the same cap explicitly (test/project/node-flags.test.ts checks, under real
// cgroups, that both give V8 the same heap limit).

const PERCENTAGE_FLAG = /^--max[-_]old[-_]space[-_]size[-_]percentage=(\d+(?:\.\d+)?)$/;

/** The Dockerfile's last ENTRYPOINT, `["node", ...flags, "bin/etcd-guard.mjs"]`: the flags. */
export function imageNodeFlags(dockerfile: string): string[] {
  const entrypoints = dockerfile.split('\n').filter((line) => /^ENTRYPOINT\s+\[/.test(line.trim()));
  const last = entrypoints
    .at(-1)
    ?.trim()
    .replace(/^ENTRYPOINT\s+/, '');
  const words: unknown = last === undefined ? undefined : JSON.parse(last);
  if (!Array.isArray(words) || words[0] !== 'node' || words.at(-1) !== 'bin/etcd-guard.mjs') {
    throw new Error(`Dockerfile: expected ENTRYPOINT ["node", ...flags, "bin/etcd-guard.mjs"], got ${String(last)}`);
  }
  return words.slice(1, -1).map(String);
}

/** A Kubernetes memory quantity of the manifests' form (`384Mi`, `1Gi`, `65536Ki`) in bytes. */
export function memoryQuantityBytes(quantity: string): number {
  const match = /^(\d+)(Ki|Mi|Gi)$/.exec(quantity);
  if (!match?.[1] || !match[2]) throw new Error(`expected a memory quantity like 384Mi, got ${JSON.stringify(quantity)}`);
  return Number(match[1]) * 1024 ** { Ki: 1, Mi: 2, Gi: 3 }[match[2] as 'Ki' | 'Mi' | 'Gi'];
}

/**
 * `flags` as node applies them under a memory limit of `limitBytes`: the percentage becomes the
 * explicit --max-old-space-size (MiB, rounded down) it gives; every other flag is kept.
 * `limitBytes` null: no limit, so the percentage is dropped and V8 sizes the heap itself, as for
 * `etcd-guard` started on a host without the image's flags.
 */
export function nodeFlagsUnderLimit(flags: readonly string[], limitBytes: number | null): string[] {
  return flags.flatMap((flag) => {
    const match = PERCENTAGE_FLAG.exec(flag);
    if (match?.[1] === undefined) return [flag];
    if (limitBytes === null) return [];
    return [`--max-old-space-size=${Math.floor(((limitBytes / (1024 * 1024)) * Number(match[1])) / 100)}`];
  });
}
