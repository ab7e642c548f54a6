// The CLI bundle replaces etcd3's runtime `loadSync(rpc.proto)` with a package definition built at
// build time (scripts/etcd-grpc-plugin.mjs). It must be the same protocol: for every etcd method,
// the same path, streaming and method names, the same bytes on the wire for a request, and the
// same objects from a response (int64 as strings, enums as strings, defaults, oneofs) as
// @grpc/proto-loader with etcd3's options. Messages with every field set, built from the .proto.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs build script without type declarations
import { etcdGrpcDefinitionPlugin } from '../scripts/etcd-grpc-plugin.mjs';

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
let bundled: Definition;
const reference = protoLoader.loadSync(RPC_PROTO, ETCD3_OPTIONS) as unknown as Definition;
const root = new protobuf.Root().loadSync(RPC_PROTO, { keepCase: true });
root.resolveAll();
const methods = Object.entries(reference)
  .filter(([, definition]) => !('format' in definition))
  .flatMap(([service, definition]) => Object.keys(definition).map((method) => ({ service, method })));

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'etcd-guard-grpc-definition-'));
  const file = path.join(dir, 'definition.mjs');
  const result = await build({
    absWorkingDir: ROOT,
    stdin: { contents: "export { packageDefinition } from 'etcd-guard:etcd-package-definition';", resolveDir: ROOT },
    bundle: true,
    format: 'esm',
    platform: 'node',
    write: false,
    plugins: [etcdGrpcDefinitionPlugin(ROOT)],
    logLevel: 'silent',
  });
  await writeFile(file, result.outputFiles[0]?.text ?? '');
  ({ packageDefinition: bundled } = (await import(pathToFileURL(file).href)) as { packageDefinition: Definition });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the bundle's prebuilt etcd gRPC definition", () => {
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
    expect(ours.responseDeserialize(responseBytes)).toEqual(theirs.responseDeserialize(responseBytes));
    expect(ours.requestDeserialize(theirs.requestSerialize(request))).toEqual(
      theirs.requestDeserialize(theirs.requestSerialize(request)),
    );
    // An empty response decodes to the same defaults (int64 "0", the enum's first name).
    expect(ours.responseDeserialize(Buffer.alloc(0))).toEqual(theirs.responseDeserialize(Buffer.alloc(0)));
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
