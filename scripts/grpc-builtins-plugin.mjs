// An esbuild plugin for the CLI bundle: two of Node's built-ins as grpc-js sees them.
// - net: grpc-js asks `isIPv6` of every address it handles, and the first call compiles Node's
//   IPv6 regular expression (~5 ms of every `evaluate` process here, BENCHMARKS.md, issue 20).
//   An IPv6 address always contains a colon, so a string without one is answered `false` (and
//   `isIP` 4 or 0) without it; anything else still goes to Node. Same answers, every input.
// - zlib: required at the top of grpc-js's compression filter and server call, used only when a
//   peer compresses (the probe never asks it to); loaded at the first use of any of its exports.
const NAMESPACE = 'etcd-guard-grpc-builtin';
const GRPC_JS = /[\\/]@grpc[\\/]grpc-js[\\/]/;

const SOURCES = {
  net: `const net = require('node:net');
const isIPv6 = (value) => (typeof value === 'string' && !value.includes(':') ? false : net.isIPv6(value));
const isIP = (value) => (net.isIPv4(value) ? 4 : isIPv6(value) ? 6 : 0);
module.exports = new Proxy(net, {
  get: (target, key) => (key === 'isIPv6' ? isIPv6 : key === 'isIP' ? isIP : Reflect.get(target, key)),
});
`,
  zlib: `let zlib;
module.exports = new Proxy({}, {
  get: (_target, key) => Reflect.get((zlib ??= require('node:zlib')), key),
  has: (_target, key) => Reflect.has((zlib ??= require('node:zlib')), key),
});
`,
};

/** The plugin; `require` in the bundle is the banner's createRequire (scripts/build.mjs). */
export function grpcBuiltinsPlugin() {
  return {
    name: 'grpc-builtins',
    setup(build) {
      build.onResolve({ filter: /^(node:)?(net|zlib)$/ }, (args) => {
        if (args.kind !== 'require-call' || !GRPC_JS.test(args.importer)) return undefined;
        return { path: args.path.replace(/^node:/, ''), namespace: NAMESPACE };
      });
      build.onLoad({ filter: /.*/, namespace: NAMESPACE }, (args) => ({ contents: SOURCES[args.path], loader: 'js' }));
    },
  };
}
