// An esbuild plugin for the CLI bundle: our modules' imports of Node's built-ins become CommonJS
// requires. An ES module import of a built-in makes Node build an ES module facade for it, which
// reads every export once, and some exports are getters that load more of Node: `node:fs`'s
// facade reads `fs.promises` and `fs.ReadStream` (loading fs/promises and the fs streams),
// `node:util`'s reads `TextDecoder`; ~7–9 ms of every `evaluate` process here (BENCHMARKS.md,
// issue 20). A require returns the built-in's own exports object and runs no getter. Named
// imports still read the property at each use (esbuild's __toESM), as ES module bindings would.
import { builtinModules } from 'node:module';

const NAMESPACE = 'etcd-guard-builtin';
const BUILTINS = new Set(builtinModules);

/** `node:fs`, `fs`, `fs/promises` → the built-in's name, or null when `specifier` is not one. */
export function builtinName(specifier) {
  const name = specifier.startsWith('node:') ? specifier.slice('node:'.length) : specifier;
  return BUILTINS.has(name) ? name : null;
}

/** The plugin; `require` in the bundle is the banner's createRequire (scripts/build.mjs). */
export function builtinRequirePlugin() {
  return {
    name: 'builtin-require',
    setup(build) {
      build.onResolve({ filter: /^(node:)?[a-z_]+(\/[a-z_]+)*$/ }, (args) => {
        // Only ES module imports: a CommonJS require of a built-in (grpc-js, etcd3) already is one.
        if (args.kind !== 'import-statement' && args.kind !== 'dynamic-import') return undefined;
        const name = builtinName(args.path);
        return name === null ? undefined : { path: name, namespace: NAMESPACE };
      });
      build.onLoad({ filter: /.*/, namespace: NAMESPACE }, (args) => ({
        contents: `module.exports = require(${JSON.stringify(`node:${args.path}`)});`,
        loader: 'js',
      }));
    },
  };
}
