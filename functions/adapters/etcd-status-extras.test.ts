// etcd 3.6's Status fields that etcd3 1.1.2's rpc.proto lacks (dbSizeQuota, storageVersion,
// downgradeInfo): read
// from the wire bytes beside etcd3's own decoding, and used by the db-size check instead of the
// configured quota. A 3.6 StatusResponse is built from etcd's v3.6 field numbers with protobufjs
// (the library @grpc/proto-loader uses); a gRPC stand-in serves it to the real probe.
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EtcdProbeSession } from './etcd-member-probe.js';
import { statusExtras } from './etcd-status-extras.js';
import { Deadline } from '../domain/deadline.js';
import { evaluateCluster } from '../domain/judgement/evaluate-cluster.js';
import { type EndpointProbe } from '../ports/etcd-probe.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const requireFromLoader = createRequire(path.join(ROOT, 'node_modules/@grpc/proto-loader/package.json'));
const protobuf = requireFromLoader('protobufjs') as typeof import('protobufjs');
const requireFromEtcd3 = createRequire(path.join(ROOT, 'node_modules/etcd3/package.json'));
const grpc = requireFromEtcd3('@grpc/grpc-js') as typeof import('@grpc/grpc-js');
const protoLoader = requireFromLoader('@grpc/proto-loader') as typeof import('@grpc/proto-loader');

// etcd v3.6 api/etcdserverpb/rpc.proto, StatusResponse (header and downgradeInfo as messages).
const root = protobuf.Root.fromJSON({
  nested: {
    ResponseHeader: {
      fields: {
        cluster_id: { type: 'uint64', id: 1 },
        member_id: { type: 'uint64', id: 2 },
        revision: { type: 'int64', id: 3 },
        raft_term: { type: 'uint64', id: 4 },
      },
    },
    DowngradeInfo: { fields: { enabled: { type: 'bool', id: 1 }, targetVersion: { type: 'string', id: 2 } } },
    StatusResponse36: {
      fields: {
        header: { type: 'ResponseHeader', id: 1 },
        version: { type: 'string', id: 2 },
        dbSize: { type: 'int64', id: 3 },
        leader: { type: 'uint64', id: 4 },
        raftIndex: { type: 'uint64', id: 5 },
        raftTerm: { type: 'uint64', id: 6 },
        raftAppliedIndex: { type: 'uint64', id: 7 },
        errors: { rule: 'repeated', type: 'string', id: 8 },
        dbSizeInUse: { type: 'int64', id: 9 },
        isLearner: { type: 'bool', id: 10 },
        storageVersion: { type: 'string', id: 11 },
        dbSizeQuota: { type: 'int64', id: 12 },
        downgradeInfo: { type: 'DowngradeInfo', id: 13 },
      },
    },
  },
});
const StatusResponse36 = root.lookupType('StatusResponse36');
const GIB = 1024 ** 3;

function status36(overrides: Record<string, unknown> = {}): Buffer {
  const message = StatusResponse36.fromObject({
    header: { cluster_id: '17', member_id: '42', revision: '9', raft_term: '3' },
    version: '3.6.5',
    dbSize: String(900 * 1024 ** 2),
    leader: '42',
    raftIndex: '120',
    raftTerm: '3',
    raftAppliedIndex: '120',
    errors: [],
    dbSizeInUse: String(800 * 1024 ** 2),
    isLearner: false,
    storageVersion: '3.6.0',
    dbSizeQuota: String(GIB),
    downgradeInfo: { enabled: false, targetVersion: '' },
    ...overrides,
  });
  return Buffer.from(StatusResponse36.encode(message).finish());
}

// Status as a real etcd 3.6.16 member sent it (test/harness/raw-status.ts), before and after
// `etcdctl downgrade enable 3.5` on its 3-member cluster.
const REAL_3_6_16 =
  '0a1808a9f3d8a3a5a8ebc92310dc8afea3db9190c83a180120021206332e362e31361880a00120dc8afea3db9190c83a280b3002380b488080015a05332e362e306080808080086a00';
const REAL_3_6_16_DOWNGRADING =
  '0a1808a9f3d8a3a5a8ebc92310dc8afea3db9190c83a180120021206332e362e31361880a00120dc8afea3db9190c83a280c3002380c488080015a05332e362e306080808080086a0908011205332e352e30';
const NO_DOWNGRADE = { enabled: false, targetVersion: '' };

describe('statusExtras', () => {
  it.each<[string, Buffer, ReturnType<typeof statusExtras>]>([
    [
      'reads dbSizeQuota, storageVersion and downgradeInfo of a 3.6 response',
      status36(),
      { dbSizeQuotaBytes: GIB, storageVersion: '3.6.0', downgrade: NO_DOWNGRADE },
    ],
    [
      'reads nothing from a 3.5 response (no fields 11 to 13)',
      status36({ storageVersion: '', dbSizeQuota: '0', downgradeInfo: null }),
      {},
    ],
    ['ignores a negative quota', status36({ dbSizeQuota: '-5', storageVersion: '', downgradeInfo: null }), {}],
    [
      'reads an enabled downgrade and its target',
      status36({ downgradeInfo: { enabled: true, targetVersion: '3.5.0' } }),
      { dbSizeQuotaBytes: GIB, storageVersion: '3.6.0', downgrade: { enabled: true, targetVersion: '3.5.0' } },
    ],
    [
      'reads an empty downgradeInfo (all defaults, as etcd sends it) as no downgrade',
      Buffer.from([0x6a, 0x00]),
      { downgrade: NO_DOWNGRADE },
    ],
    [
      'shows a target version with unprintable bytes as ? and at most 32 characters',
      status36({ downgradeInfo: { enabled: true, targetVersion: `3.5\u0000${'9'.repeat(40)}` } }),
      {
        dbSizeQuotaBytes: GIB,
        storageVersion: '3.6.0',
        downgrade: { enabled: true, targetVersion: `3.5?${'9'.repeat(28)}` },
      },
    ],
    [
      'keeps what came before a downgradeInfo cut short',
      status36({ downgradeInfo: { enabled: true, targetVersion: '3.5.0' } }).subarray(0, status36().length + 3),
      { dbSizeQuotaBytes: GIB, storageVersion: '3.6.0' },
    ],
    [
      'reads a real etcd 3.6.16 Status: no downgrade',
      Buffer.from(REAL_3_6_16, 'hex'),
      { dbSizeQuotaBytes: 2 * GIB, storageVersion: '3.6.0', downgrade: NO_DOWNGRADE },
    ],
    [
      'reads a real etcd 3.6.16 Status after downgrade enable 3.5',
      Buffer.from(REAL_3_6_16_DOWNGRADING, 'hex'),
      { dbSizeQuotaBytes: 2 * GIB, storageVersion: '3.6.0', downgrade: { enabled: true, targetVersion: '3.5.0' } },
    ],
    [
      'stops at bytes cut short',
      status36().subarray(0, status36().length - 3),
      { dbSizeQuotaBytes: GIB, storageVersion: '3.6.0' },
    ],
    ['reads nothing from garbage', Buffer.from([0xff, 0xff, 0xff]), {}],
  ])('%s', (_name, bytes, expected) => {
    expect(statusExtras(bytes)).toEqual(expected);
  });
});

describe('a probe of a member that reports its quota (a gRPC stand-in answering Status as etcd 3.6)', () => {
  let server: import('@grpc/grpc-js').Server;
  let endpoint: string;

  beforeAll(async () => {
    const definition = protoLoader.loadSync(path.join(ROOT, 'node_modules/etcd3/proto/rpc.proto'), { keepCase: true });
    const maintenance = definition['etcdserverpb.Maintenance'] as Record<
      string,
      import('@grpc/proto-loader').MethodDefinition<object, object>
    >;
    const status = maintenance.Status;
    if (status === undefined) throw new Error('no Maintenance.Status in etcd3 rpc.proto');
    server = new grpc.Server();
    server.addService(
      {
        Status: { ...status, responseSerialize: (value: Buffer) => value },
      } as unknown as import('@grpc/grpc-js').ServiceDefinition,
      { Status: (_call: unknown, callback: (error: null, value: Buffer) => void) => callback(null, status36()) },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) =>
        error ? reject(error) : resolve(bound),
      ),
    );
    endpoint = `http://127.0.0.1:${port}`;
  });

  afterAll(() => {
    server?.forceShutdown();
  });

  it('takes the quota the member reports, and the db-size check judges against it', async () => {
    const session = new EtcdProbeSession({});
    let probe: EndpointProbe;
    try {
      probe = await session.probe(endpoint, Deadline.after(2000));
    } finally {
      session.close();
    }
    expect(probe.status).toMatchObject({ ok: true, value: { version: '3.6.5', dbSizeQuotaBytes: GIB } });
    if (!probe.status.ok) throw new Error('no status');
    // 900 MiB of a reported 1 GiB quota is 88 %: a warning, where the configured 8 GiB says 11 %.
    const evaluation = evaluateCluster({
      target: 'quota',
      endpoints: [endpoint],
      memberList: { ok: true, value: [{ id: '42', name: 'm-0', peerUrls: [], clientUrls: [endpoint], isLearner: false }] },
      probes: [{ ...probe, alarms: { ok: true, value: [] }, linearizableRead: { ok: true, value: null } }],
      quotaBackendBytes: 8 * GIB,
      evaluatedAt: '2026-12-01T00:00:00.000Z',
      durationMs: 1,
    });
    const dbSize = evaluation.checks.find((check) => check.name === 'db-size');
    expect(dbSize).toMatchObject({ status: 'warn' });
    expect(dbSize?.message).toContain('is 88% of quota 1.0 GiB (reported by the member)');
  });
});
