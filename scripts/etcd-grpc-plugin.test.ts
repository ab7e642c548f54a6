// The CLI bundle replaces etcd3's runtime `loadSync(rpc.proto)` with a package definition built at
// build time (scripts/etcd-grpc-plugin.mjs). It must be the same protocol: for every etcd method,
// the same path, streaming and method names, the same bytes on the wire for a request, and the
// same objects from a response (int64 as strings, enums as strings, defaults, oneofs) as
// @grpc/proto-loader with etcd3's options. Messages with every field set, built from the .proto.
// Both forms the build can emit are held to that: the probe's methods with encoders, decoders and
// converters generated at build time (the rest through a lazily built Root), and the fallback
// where every method goes through the Root.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without type declarations
import { etcdGrpcDefinitionPlugin } from './etcd-grpc-plugin.mjs';

const ROOT = path.resolve(import.meta.dirname, '..');
const requireFromLoader = createRequire(path.join(ROOT, 'node_modules/@grpc/proto-loader/package.json'));
const protoLoader = requireFromLoader('@grpc/proto-loader') as typeof import('@grpc/proto-loader');
const protobuf = requireFromLoader('protobufjs') as typeof import('protobufjs');
const RPC_PROTO = path.join(ROOT, 'node_modules/etcd3/proto/rpc.proto');
// etcd3 1.1.2's options (node_modules/etcd3/lib/connection-pool.js).
const ETCD3_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

interface MethodDefinition {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  originalName?: string;
  requestSerialize: (value: unknown) => Buffer;
  requestDeserialize: (bytes: Buffer) => unknown;
  responseSerialize: (value: unknown) => Buffer;
  responseDeserialize: (bytes: Buffer) => unknown;
}
type Definition = Record<string, Record<string, MethodDefinition>>;

/** A value for every field of `type` (nested messages to `depth`), none of them a default. */
function sample(type: import('protobufjs').Type, depth = 3): Record<string, unknown> {
  const value: Record<string, unknown> = {};
  type.fieldsArray.forEach((field, index) => {
    field.resolve();
    let one: unknown;
    const resolved = field.resolvedType;
    if (resolved instanceof protobuf.Enum) one = Object.keys(resolved.values).at(-1);
    else if (resolved instanceof protobuf.Type) {
      if (depth === 0) return;
      one = sample(resolved, depth - 1);
    } else if (/int64|fixed64/.test(field.type)) one = `${9_007_199_254_740_993n + BigInt(index)}`;
    else if (/int32|fixed32/.test(field.type)) one = 7 + index;
    else if (field.type === 'bool') one = true;
    else if (field.type === 'bytes') one = Buffer.from(`bytes-${index}`);
    else if (field.type === 'string') one = `text-${index}`;
    else if (field.type === 'double' || field.type === 'float') one = 1.5;
    else throw new Error(`no sample for ${type.name}.${field.name}: ${field.type}`);
    value[field.name] = field.repeated ? [one, one] : one;
  });
  // A oneof takes one member: keep the first set field of each.
  for (const oneof of type.oneofsArray) for (const name of oneof.oneof.slice(1)) delete value[name];
  return value;
}

let dir: string;
const bundles: Record<'generated codecs' | 'fallback', Definition> = { 'generated codecs': {}, fallback: {} };
let generatedSource = '';
const reference = protoLoader.loadSync(RPC_PROTO, ETCD3_OPTIONS) as unknown as Definition;
const root = new protobuf.Root().loadSync(RPC_PROTO, { keepCase: true });
root.resolveAll();
const methods = Object.entries(reference)
  .filter(([, definition]) => !('format' in definition))
  .flatMap(([service, definition]) => Object.keys(definition).map((method) => ({ service, method })));

/** The plugin's package definition module, bundled alone and imported, with its source. */
async function buildDefinition(name: string, staticCodecs: boolean): Promise<{ definition: Definition; source: string }> {
  const file = path.join(dir, `${name}.mjs`);
  const result = await build({
    absWorkingDir: ROOT,
    stdin: { contents: "export { packageDefinition } from 'etcd-guard:etcd-package-definition';", resolveDir: ROOT },
    bundle: true,
    format: 'esm',
    platform: 'node',
    write: false,
    plugins: [etcdGrpcDefinitionPlugin(ROOT, { staticCodecs })],
    logLevel: 'silent',
  });
  const source = result.outputFiles[0]?.text ?? '';
  await writeFile(file, source);
  const { packageDefinition } = (await import(pathToFileURL(file).href)) as { packageDefinition: Definition };
  return { definition: packageDefinition, source };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-grpc-definition-'));
  const generated = await buildDefinition('generated', true);
  bundles['generated codecs'] = generated.definition;
  generatedSource = generated.source;
  bundles.fallback = (await buildDefinition('fallback', false)).definition;
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** The methods etcd-member-probe.ts calls: the ones with codecs generated at build time. */
const PROBE_METHODS = [
  'etcdserverpb.Maintenance/Status',
  'etcdserverpb.Maintenance/Alarm',
  'etcdserverpb.Cluster/MemberList',
  'etcdserverpb.KV/Range',
  'etcdserverpb.KV/Put',
  'etcdserverpb.KV/DeleteRange',
  'etcdserverpb.Watch/Watch',
];

describe.each(['generated codecs', 'fallback'] as const)("the bundle's prebuilt etcd gRPC definition (%s)", (form) => {
  let bundled: Definition;
  beforeAll(() => {
    bundled = bundles[form];
  });

  it('has every etcd service method and nothing else', () => {
    expect(methods.length).toBeGreaterThan(40);
    expect(Object.keys(bundled).sort()).toEqual([...new Set(methods.map(({ service }) => service))].sort());
    for (const { service, method } of methods) expect(bundled[service]?.[method], `${service}/${method}`).toBeDefined();
  });

  it.each(methods)('$service/$method: same path, names, wire bytes and decoded objects', ({ service, method }) => {
    const ours = bundled[service]?.[method];
    const theirs = reference[service]?.[method];
    if (ours === undefined || theirs === undefined) throw new Error(`${service}/${method} missing`);
    expect([ours.path, ours.requestStream, ours.responseStream, ours.originalName]).toEqual([
      theirs.path,
      theirs.requestStream,
      theirs.responseStream,
      theirs.originalName,
    ]);
    const serviceType = root.lookupService(service).methods[method];
    if (serviceType?.resolvedRequestType == null || serviceType.resolvedResponseType == null) throw new Error('unresolved');
    const request = sample(serviceType.resolvedRequestType);
    const response = sample(serviceType.resolvedResponseType);
    expect(ours.requestSerialize(request)).toEqual(theirs.requestSerialize(request));
    const responseBytes = theirs.responseSerialize(response);
    expect(ours.responseSerialize(response)).toEqual(responseBytes);
    expect(ours.responseDeserialize(responseBytes)).toStrictEqual(theirs.responseDeserialize(responseBytes));
    expect(ours.requestDeserialize(theirs.requestSerialize(request))).toStrictEqual(
      theirs.requestDeserialize(theirs.requestSerialize(request)),
    );
    // An empty response decodes to the same defaults (int64 "0", the enum's first name).
    expect(ours.responseDeserialize(Buffer.alloc(0))).toStrictEqual(theirs.responseDeserialize(Buffer.alloc(0)));
    expect(ours.requestDeserialize(Buffer.alloc(0))).toStrictEqual(theirs.requestDeserialize(Buffer.alloc(0)));
  });

  // What the generated samples do not reach: other oneof members, numbers where strings are
  // usual, values the .proto does not name, and fields this etcd3 does not know.
  it.each([
    ['Watch/Watch', 'request', { cancel_request: { watch_id: '12' } }],
    ['Watch/Watch', 'request', { progress_request: {} }],
    ['Watch/Watch', 'request', { create_request: { key: Buffer.from('k'), filters: ['Nodelete', 0], start_revision: 3 } }],
    ['Watch/Watch', 'response', { watch_id: '-1', events: [{ type: 'Delete', kv: { key: Buffer.from('k') } }, {}] }],
    ['KV/Range', 'request', { key: 'aw==', limit: 5, sort_order: 2, sort_target: 'Mod', count_only: true }],
    ['KV/Range', 'response', { kvs: [{ key: Buffer.alloc(0), version: '-9223372036854775808' }], count: '1', more: false }],
    ['Maintenance/Alarm', 'request', { action: 'Get', memberID: 0, alarm: 'None' }],
    ['Maintenance/Alarm', 'response', { alarms: [{ memberID: '1', alarm: 7 }, { alarm: 'Corrupt' }] }],
    ['Maintenance/Status', 'response', { version: '3.6.0', errors: ['etcdserver: no leader', ''], isLearner: false }],
    ['Cluster/MemberList', 'response', { members: [{ ID: '18446744073709551615', peerURLs: [], name: '' }] }],
  ])('%s %s %j: same bytes and objects', (id, direction, value) => {
    const [service, method] = id.split('/');
    const ours = bundled[`etcdserverpb.${service}`]?.[method ?? ''];
    const theirs = reference[`etcdserverpb.${service}`]?.[method ?? ''];
    if (ours === undefined || theirs === undefined) throw new Error(`${id} missing`);
    const [serialize, deserialize] =
      direction === 'request'
        ? (['requestSerialize', 'requestDeserialize'] as const)
        : (['responseSerialize', 'responseDeserialize'] as const);
    const bytes = theirs[serialize](value);
    expect(ours[serialize](value)).toEqual(bytes);
    expect(ours[deserialize](bytes)).toStrictEqual(theirs[deserialize](bytes));
    // A field from a newer etcd (number 99, varint) is skipped the same way.
    const withUnknown = Buffer.concat([bytes, Buffer.from([0x98, 0x06, 0x2a])]);
    expect(ours[deserialize](withUnknown)).toStrictEqual(theirs[deserialize](withUnknown));
  });

  it('answers malformed input as proto-loader does: the same error or the same object', () => {
    const outcome = (run: () => unknown) => {
      try {
        return { value: run() };
      } catch (error) {
        return { error: error instanceof Error ? error.message : String(error) };
      }
    };
    for (const id of PROBE_METHODS) {
      const [service = '', method = ''] = id.split('/');
      const ours = bundled[service]?.[method];
      const theirs = reference[service]?.[method];
      if (ours === undefined || theirs === undefined) throw new Error(`${id} missing`);
      for (const bytes of [[0x12, 0x05, 0x33], [0x0a, 0x7f], [0x08], [0x0b], [0x0f, 0x01], [0x80, 0x80]]) {
        const buffer = Buffer.from(bytes);
        expect(
          outcome(() => ours.responseDeserialize(buffer)),
          `${id} ${buffer.toString('hex')}`,
        ).toStrictEqual(outcome(() => theirs.responseDeserialize(buffer)));
      }
      expect(outcome(() => ours.requestSerialize([]))).toStrictEqual(outcome(() => theirs.requestSerialize([])));
    }
  });

  it('decodes int64 as decimal strings and enums as names, as etcd3 expects', () => {
    const alarm = bundled['etcdserverpb.Maintenance']?.Alarm;
    const status = bundled['etcdserverpb.Maintenance']?.Status;
    if (alarm === undefined || status === undefined) throw new Error('Maintenance methods missing');
    const alarmBytes = alarm.responseSerialize({
      header: { revision: '9007199254740993' },
      alarms: [{ memberID: '18446744073709551615', alarm: 'Nospace' }],
    });
    expect(alarm.responseDeserialize(alarmBytes)).toMatchObject({
      header: { revision: '9007199254740993' },
      alarms: [{ memberID: '18446744073709551615', alarm: 'Nospace' }],
    });
    expect(status.responseDeserialize(status.responseSerialize({ dbSize: '4294967296' }))).toMatchObject({
      dbSize: '4294967296',
      leader: '0',
    });
  });
});

describe('generated codecs', () => {
  it("cover exactly the probe's methods, and the build names them", () => {
    for (const id of PROBE_METHODS) expect(generatedSource).toContain(JSON.stringify(id));
    expect(generatedSource).toContain('function StatusResponse$decode(');
    expect(generatedSource).not.toContain('function AuthenticateResponse$decode(');
  });
});
