// An esbuild plugin for the CLI bundle: etcd3 parses its .proto files when it is imported
// (connection-pool.js: `loadSync(rpc.proto)` from @grpc/proto-loader), and proto-loader then
// builds a reflection descriptor of every message, which a gRPC client never reads; protobufjs
// then generates each message's codecs at first use. Every `evaluate` process paid for all of it
// before its first etcd call. The plugin does that parsing once, at build time, and puts in its
// place what @grpc/grpc-js's loadPackageDefinition needs for a client: per method its path,
// streaming flags, name and serializers over a protobufjs Root built from the JSON of the parsed
// files (decoding with etcd3's options: keepCase, int64 as strings, enums as strings, defaults,
// oneofs). The methods the probe calls go further: their messages get the encoders, decoders and
// converters protobufjs would generate at their first use, generated here, and the Root is built
// only when another method is first called. Kept because its removal, measured in the same run,
// costs `evaluate` start-up CPU and resident memory (BENCHMARKS.md, "Issue 31: build-time
// plugins"). It breaks loudly, not silently: the build fails when etcd3's call changes, and
// etcd-grpc-plugin.test.ts compares every method with proto-loader's. Without the bundle (tsx,
// tsc output) etcd3 runs unchanged.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

const VIRTUAL_MODULE = 'etcd-guard:etcd-package-definition';
// What connection-pool.js must contain, whitespace aside; anything else (a new etcd3) fails the
// build instead of silently running a definition built with other options.
const PROTO_LOADER_REQUIRE = 'const proto_loader_1 = require("@grpc/proto-loader");';
const LOAD_SYNC_CALL =
  '(0, proto_loader_1.loadSync)(`${__dirname}/../proto/rpc.proto`, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, })';
const LOAD_OPTIONS = { keepCase: true };

/** `text` with every run of whitespace made one space, and the map back to the original offsets. */
function squeezeWhitespace(text) {
  let squeezed = '';
  const offsets = [];
  for (let index = 0; index < text.length; index++) {
    if (/\s/.test(text[index]) && /\s/.test(text[index - 1] ?? '')) continue;
    squeezed += /\s/.test(text[index]) ? ' ' : text[index];
    offsets.push(index);
  }
  offsets.push(text.length);
  return { squeezed, offsets };
}

/** Replaces `needle` (compared with runs of whitespace as one space) in `source`, exactly once. */
function replaceOnce(source, needle, replacement, file) {
  const { squeezed, offsets } = squeezeWhitespace(source);
  const at = squeezed.indexOf(needle);
  if (at < 0 || squeezed.indexOf(needle, at + 1) >= 0) {
    throw new Error(`${file}: expected exactly one \`${needle}\` (has etcd3 changed?)`);
  }
  const start = offsets[at];
  const end = offsets[at + needle.length];
  return `${source.slice(0, start)}${replacement}${source.slice(end)}`;
}

/**
 * The methods the probe calls (functions/adapters/etcd-member-probe.ts): their messages get the
 * codecs protobufjs would generate at first use, generated here. Any other method still works,
 * with protobufjs generating its codecs at run time as before.
 */
const PRECOMPILED_METHODS = [
  'etcdserverpb.Maintenance/Status',
  'etcdserverpb.Maintenance/Alarm',
  'etcdserverpb.Cluster/MemberList',
  'etcdserverpb.KV/Range',
  'etcdserverpb.KV/Put',
  'etcdserverpb.KV/DeleteRange',
  'etcdserverpb.Watch/Watch',
];

/** Parses etcd3's rpc.proto (with the protobufjs its proto-loader uses) into the bundle's table. */
function describeServices(rootDir) {
  const requireFromLoader = createRequire(path.join(rootDir, 'node_modules/@grpc/proto-loader/package.json'));
  const protobuf = requireFromLoader('protobufjs');
  const camelCase = requireFromLoader('lodash.camelcase');
  const root = new protobuf.Root().loadSync(path.join(rootDir, 'node_modules/etcd3/proto/rpc.proto'), LOAD_OPTIONS);
  root.resolveAll();
  const methods = [];
  const visit = (namespace) => {
    for (const object of namespace.nestedArray) {
      if (object instanceof protobuf.Service) {
        const serviceName = object.fullName.slice(1);
        for (const method of object.methodsArray) {
          methods.push({
            service: serviceName,
            name: method.name,
            originalName: camelCase(method.name),
            requestStream: Boolean(method.requestStream),
            responseStream: Boolean(method.responseStream),
            requestType: method.resolvedRequestType.fullName.slice(1),
            responseType: method.resolvedResponseType.fullName.slice(1),
          });
        }
      } else if (object.nestedArray) {
        visit(object);
      }
    }
  };
  visit(root);
  return { protobuf, root, descriptor: root.toJSON(), methods, loaderDir: path.join(rootDir, 'node_modules/@grpc/proto-loader') };
}

/** Every message and enum a message refers to through its fields, itself included, by full name. */
function reachableTypes(protobuf, type, found = new Map()) {
  const name = type.fullName.slice(1);
  if (found.has(name)) return found;
  found.set(name, type);
  if (type instanceof protobuf.Type) {
    for (const field of type.fieldsArray) if (field.resolvedType) reachableTypes(protobuf, field.resolvedType, found);
  }
  return found;
}

/**
 * The source of what protobufjs generates at run time for a message (Type.generateConstructor
 * and Type#setup's encoder, decoder and converters), as one factory over setup's scope, with the
 * full names of its fields' types in field order: `types[i]` in that code is field i's type.
 */
function staticMessage(protobuf, type) {
  const codecs = [
    `ctor: (${protobuf.Type.generateConstructor(type).toString()})`,
    `encode: (${protobuf.encoder(type).toString()})`,
    `decode: (${protobuf.decoder(type).toString()})`,
    `fromObject: (${protobuf.converter.fromObject(type).toString()})`,
    `toObject: (${protobuf.converter.toObject(type).toString()})`,
  ];
  const fieldTypes = type.fieldsArray.map((field) => (field.resolvedType ? field.resolvedType.fullName.slice(1) : null));
  return `{ name: ${JSON.stringify(type.name)}, fieldTypes: ${JSON.stringify(fieldTypes)}, make: (function (Writer, Reader, types, util) {\n  return {\n${codecs.join(',\n')}\n};\n}) }`;
}

/**
 * The messages and enums of the probe's methods, generated: what the bundle uses for them in
 * place of protobufjs reflection. Throws when a method is missing or a message has something the
 * static form does not carry (map fields, wrappers of well-known types).
 */
export function staticDefinition({ protobuf, root, methods }) {
  const types = new Map();
  for (const id of PRECOMPILED_METHODS) {
    const method = methods.find((candidate) => `${candidate.service}/${candidate.name}` === id);
    if (method === undefined) throw new Error(`etcd3's rpc.proto has no ${id}`);
    for (const name of [method.requestType, method.responseType]) reachableTypes(protobuf, root.lookup(name), types);
  }
  const messages = [];
  const enums = {};
  for (const [name, type] of types) {
    if (type instanceof protobuf.Enum) {
      enums[name] = type.toJSON();
      continue;
    }
    if (type.fieldsArray.some((field) => field.map) || protobuf.wrappers[`.${name}`]) {
      throw new Error(`${name} has fields the generated codecs do not cover`);
    }
    messages.push(`  ${JSON.stringify(name)}: ${staticMessage(protobuf, type)}`);
  }
  return { methods: PRECOMPILED_METHODS, messages, enums };
}

/** The source of the module that stands in for proto-loader's package definition. */
function packageDefinitionSource(described, staticCodecs) {
  if (!staticCodecs) return definitionSource(described, null);
  let generated = null;
  try {
    generated = staticDefinition(described);
  } catch (error) {
    console.warn(`etcd-guard: etcd codecs left to protobufjs at run time (${error instanceof Error ? error.message : error})`);
  }
  return definitionSource(described, generated);
}

/**
 * Every method's serializers over a protobufjs Root of all of rpc.proto, built at the first call
 * of a method that needs it. The probe's methods use codecs generated at build time instead, so
 * an `evaluate` process never builds the Root nor generates code.
 */
function definitionSource({ descriptor, methods }, generated) {
  return `import protobuf from 'protobufjs/light.js';
// Generated by scripts/etcd-grpc-plugin.mjs from etcd3's rpc.proto at build time.
const DECODE_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const METHODS = ${JSON.stringify(methods)};
// A JSON string, parsed only by the first method that needs the Root: as an object literal, the
// whole of rpc.proto was built on every import, for methods the probe never calls.
const DESCRIPTOR_JSON = ${JSON.stringify(JSON.stringify(descriptor))};
const STATIC_METHODS = new Set(${JSON.stringify(generated?.methods ?? [])});
// What protobufjs's Type.generateConstructor and Type#setup would generate for these messages.
const STATIC_MESSAGES = {
${generated?.messages.join(',\n') ?? ''}
};
const STATIC_ENUMS = ${JSON.stringify(generated?.enums ?? {})};

let root;
function reflected(name) {
  if (root === undefined) {
    root = protobuf.Root.fromJSON(JSON.parse(DESCRIPTOR_JSON));
    root.resolveAll();
  }
  return root.lookupType(name);
}

let staticTypes;
/** The generated messages as objects with a reflected type's codec methods and \`ctor\`. */
function staticType(name) {
  if (staticTypes === undefined) {
    staticTypes = new Map();
    const fieldTypes = new Map();
    for (const [fullName, json] of Object.entries(STATIC_ENUMS)) {
      staticTypes.set(fullName, protobuf.Enum.fromJSON(fullName.slice(fullName.lastIndexOf('.') + 1), json));
    }
    for (const [fullName, message] of Object.entries(STATIC_MESSAGES)) {
      const types = [];
      staticTypes.set(fullName, { name: message.name, ...message.make(protobuf.Writer, protobuf.Reader, types, protobuf.util) });
      fieldTypes.set(types, message.fieldTypes);
    }
    for (const [types, names] of fieldTypes) for (const fieldType of names) types.push(fieldType === null ? null : staticTypes.get(fieldType));
  }
  return staticTypes.get(name);
}

// As @grpc/proto-loader's createSerializer/createDeserializer.
function serializer(typeOf) {
  return (value) => {
    const type = typeOf();
    if (Array.isArray(value)) {
      throw new Error(\`Failed to serialize message: expected object with \${type.name} structure, got array instead\`);
    }
    return type.encode(type.fromObject(value)).finish();
  };
}
function deserializer(typeOf) {
  return (buffer) => {
    const type = typeOf();
    return type.toObject(type.decode(buffer), DECODE_OPTIONS);
  };
}

export const packageDefinition = {};
for (const method of METHODS) {
  const generated = STATIC_METHODS.has(\`\${method.service}/\${method.name}\`);
  const typeOf = (name) => () => (generated ? staticType(name) : reflected(name));
  packageDefinition[method.service] ??= {};
  packageDefinition[method.service][method.name] = {
    path: \`/\${method.service}/\${method.name}\`,
    requestStream: method.requestStream,
    responseStream: method.responseStream,
    requestSerialize: serializer(typeOf(method.requestType)),
    requestDeserialize: deserializer(typeOf(method.requestType)),
    responseSerialize: serializer(typeOf(method.responseType)),
    responseDeserialize: deserializer(typeOf(method.responseType)),
    originalName: method.originalName,
    options: {},
  };
}
`;
}

/**
 * The plugin: etcd3's connection-pool.js gets the prebuilt package definition. `staticCodecs:
 * false` builds the fallback (every method through a protobufjs Root), for the tests.
 */
export function etcdGrpcDefinitionPlugin(rootDir, { staticCodecs = true } = {}) {
  return {
    name: 'etcd-grpc-definition',
    setup(build) {
      build.onLoad({ filter: /[\\/]etcd3[\\/]lib[\\/]connection-pool\.js$/ }, async (args) => {
        let source = await readFile(args.path, 'utf8');
        source = replaceOnce(source, PROTO_LOADER_REQUIRE, '', args.path);
        source = replaceOnce(source, LOAD_SYNC_CALL, `require(${JSON.stringify(VIRTUAL_MODULE)}).packageDefinition`, args.path);
        return { contents: source, loader: 'js' };
      });
      build.onResolve({ filter: /^etcd-guard:etcd-package-definition$/ }, (args) => ({
        path: args.path,
        namespace: 'etcd-guard',
      }));
      build.onLoad({ filter: /.*/, namespace: 'etcd-guard' }, () => {
        const described = describeServices(rootDir);
        return { contents: packageDefinitionSource(described, staticCodecs), loader: 'js', resolveDir: described.loaderDir };
      });
    },
  };
}
