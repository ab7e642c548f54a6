// The V8 memory flags the CLI launcher (bin/) derives where it starts: a heap cap from the cgroup
// memory limit (or a default when nothing limits memory), the webhook's small young generation,
// and never a flag node already has.
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_OLD_SPACE_MIB,
  memoryLimitBytes,
  nodeFlagsFor,
  oldSpaceMiB,
  parseCgroupMemoryLimit,
} from '../../bin/node-flags.mjs';

const MIB = 1024 * 1024;
const GIB = 1024 * MIB;
const HOST = 24 * GIB;

describe('reading a cgroup memory limit', () => {
  it.each([
    ['cgroup v2, 384Mi', `${384 * MIB}\n`, 384 * MIB],
    ['cgroup v2, unlimited', 'max\n', null],
    ['cgroup v1, 1Gi', `${GIB}`, GIB],
    ['cgroup v1, unlimited (page-rounded LONG_MAX)', '9223372036854771712\n', null],
    ['a limit above the host memory limits nothing', `${32 * GIB}`, null],
    ['a missing file', undefined, null],
    ['an empty file', '', null],
    ['zero', '0', null],
    ['a negative number', '-1', null],
    ['a unit suffix (not a kernel format)', '384Mi', null],
    ['a fraction', '1.5e9', null],
  ])('%s', (_case, text, expected) => {
    expect(parseCgroupMemoryLimit(text, HOST)).toBe(expected);
  });

  it.each([
    ['v2 only', { v2: `${512 * MIB}` }, 512 * MIB],
    ['v1 only', { v1: `${256 * MIB}` }, 256 * MIB],
    ['the downward API only', { env: `${384 * MIB}` }, 384 * MIB],
    ['the smallest of several', { v2: `${GIB}`, v1: '9223372036854771712', env: `${384 * MIB}` }, 384 * MIB],
    ['none readable', {}, null],
    ['all unlimited', { v2: 'max', v1: '9223372036854771712', env: 'junk' }, null],
  ])('%s', (_case, texts, expected) => {
    expect(memoryLimitBytes(texts, HOST)).toBe(expected);
  });
});

describe("V8's old-generation cap from the limit", () => {
  it.each([
    ['no limit: the default', null, DEFAULT_OLD_SPACE_MIB],
    ['the manifests’ 384Mi: half', 384 * MIB, 192],
    ['1Gi: half', GIB, 512],
    ['an odd byte count rounds down', 300 * MIB + 1, 150],
    ['100Mi: the 64 MiB floor', 100 * MIB, 64],
    ['16Gi: the 4 GiB ceiling', 16 * GIB, 4096],
  ])('%s', (_case, limit, expected) => {
    expect(oldSpaceMiB(limit)).toBe(expected);
  });
});

describe('the flags added for a command', () => {
  const none = { execArgv: [], nodeOptions: undefined };
  it.each([
    [
      'webhook on a host: young generation and the default cap',
      'webhook',
      null,
      none,
      ['--max-semi-space-size=2', `--max-old-space-size=${DEFAULT_OLD_SPACE_MIB}`],
    ],
    [
      'webhook in a 384Mi pod under the image ENTRYPOINT: the cap only',
      'webhook',
      384 * MIB,
      { execArgv: ['--max-semi-space-size=2'], nodeOptions: undefined },
      ['--max-old-space-size=192'],
    ],
    ['evaluate in a 384Mi pod: the cap', 'evaluate', 384 * MIB, none, ['--max-old-space-size=192']],
    ['evaluate on a host: nothing (a second start-up would cost more than it saves)', 'evaluate', null, none, []],
    ['--help on a host: nothing', '--help', null, none, []],
    ['no command in a pod: the cap', undefined, 384 * MIB, none, ['--max-old-space-size=192']],
    [
      'a cap in NODE_OPTIONS wins',
      'webhook',
      384 * MIB,
      { execArgv: [], nodeOptions: '--max-old-space-size=300' },
      ['--max-semi-space-size=2'],
    ],
    ['a cap as a node flag wins', 'evaluate', 384 * MIB, { execArgv: ['--max-old-space-size=300'], nodeOptions: undefined }, []],
    [
      'underscores are the same flag to node',
      'webhook',
      null,
      { execArgv: ['--max_old_space_size=300', '--max_semi_space_size=4'], nodeOptions: undefined },
      [],
    ],
    ['a percentage cap wins too', 'evaluate', 384 * MIB, { execArgv: [], nodeOptions: '--max-old-space-size-percentage=60' }, []],
    [
      'a similar flag is not the cap',
      'evaluate',
      384 * MIB,
      { execArgv: ['--max-old-space-sizes=1'], nodeOptions: undefined },
      ['--max-old-space-size=192'],
    ],
  ])('%s', (_case, command, limitBytes, given, expected) => {
    expect(nodeFlagsFor({ command, limitBytes, ...given })).toEqual(expected);
  });

  it.each([
    ['node already sized the heap from a 1Gi cgroup (512 + young): no re-exec for evaluate', 'evaluate', GIB, 524, []],
    ['the same for the webhook under the image ENTRYPOINT', 'webhook', GIB, 518, []],
    [
      "node's 256 MiB floor under a 384Mi cgroup is above the 192 cap: the cap",
      'evaluate',
      384 * MIB,
      262,
      ['--max-old-space-size=192'],
    ],
    ['node sized it from the host (4 GiB) despite the limit: the cap', 'evaluate', 384 * MIB, 4144, ['--max-old-space-size=192']],
    [
      'a heap limit just above the cap plus the young generation: the cap',
      'evaluate',
      384 * MIB,
      192 + 65,
      ['--max-old-space-size=192'],
    ],
    [
      'the webhook on a host (4 GiB heap): the default cap',
      'webhook',
      null,
      4144,
      [`--max-old-space-size=${DEFAULT_OLD_SPACE_MIB}`],
    ],
  ])('%s', (_case, command, limitBytes, heapLimitMiB, expected) => {
    const execArgv = ['--max-semi-space-size=2'];
    expect(nodeFlagsFor({ command, limitBytes, execArgv, nodeOptions: undefined, heapLimitMiB })).toEqual(expected);
  });

  it.each([
    ['evaluate on a host: never read (no cap is in question)', 'evaluate', null, [], 0],
    ['evaluate under a limit: read once, and it decides', 'evaluate', 384 * MIB, ['--max-old-space-size=192'], 1],
    [
      'the webhook on a host: read once',
      'webhook',
      null,
      ['--max-semi-space-size=2', `--max-old-space-size=${DEFAULT_OLD_SPACE_MIB}`],
      1,
    ],
  ] as const)(
    'a heap limit given as a function (the launcher, which loads node:v8 for it): %s',
    (_case, command, limitBytes, expected, reads) => {
      let calls = 0;
      const heapLimitMiB = () => {
        calls++;
        return 4144;
      };
      expect(nodeFlagsFor({ command, limitBytes, execArgv: [], nodeOptions: undefined, heapLimitMiB })).toEqual(expected);
      expect(calls).toBe(reads);
    },
  );
});
