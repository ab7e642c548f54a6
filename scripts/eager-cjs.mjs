// Makes the CommonJS modules of an esbuild ESM bundle compile with the chunk, so that Node's
// compile cache (bin/etcd-guard.mjs enables it) holds their code. esbuild wraps each CommonJS
// module (grpc-js, protobufjs, etcd3, cockatiel: all of the etcd chunk) in a method of an object
// literal, `__commonJS({ "path"(exports, module) { … } })`, and V8 compiles such a function only
// when it is first called. Node 22 writes a module's code cache right after compiling it, so
// those bodies were parsed and compiled again by every `evaluate` process. A function expression
// in parentheses is one V8 compiles eagerly with its script, so each wrapper becomes
// `"path": (function (exports, module) { … })`; calling it is the same. Kept because its removal,
// measured in the same run, costs `evaluate` CPU (BENCHMARKS.md, "Issue 31: build-time plugins");
// an esbuild that prints other wrappers leaves the chunk as it was (slower, never broken).
import { transform } from 'esbuild';

const OPENER = /^ {2}("[^"\n]+")\(([\w$, ]*)\) \{$/;
// esbuild's lazy ES module initializers (`__esm({ "path"() { … } })`, the etcd package definition
// and its generated codecs among them) have the same shape.
const WRAPPER = /= __(?:commonJS|esm)\(\{$/;

/**
 * `source` with every esbuild CommonJS wrapper made a parenthesized function expression, and how
 * many were; the source unchanged (count 0) when any wrapper does not have the shape esbuild
 * prints, so an esbuild that prints otherwise costs speed, never a broken bundle.
 */
export function eagerCommonJsWrappers(source) {
  const lines = source.split('\n');
  const out = [];
  let count = 0;
  for (let index = 0; index < lines.length; index++) {
    const line = lines[index];
    if (!WRAPPER.test(line)) {
      out.push(line);
      continue;
    }
    const opener = OPENER.exec(lines[index + 1] ?? '');
    if (opener === null) return { source, count: 0 };
    let end = index + 2;
    while (end + 1 < lines.length && !(lines[end] === '  }' && lines[end + 1] === '});')) end++;
    if (end + 1 >= lines.length) return { source, count: 0 };
    out.push(line, `  ${opener[1]}: (function (${opener[2]}) {`, ...lines.slice(index + 2, end), '  })', '});');
    index = end + 1;
    count++;
  }
  return { source: out.join('\n'), count };
}

/**
 * eagerCommonJsWrappers, checked: the result must parse, and every `__commonJS(` call of the
 * source must have been rewritten; otherwise the source comes back unchanged with the reason.
 */
export async function eagerCommonJsChunk(source) {
  const wrappers = source.split('\n').filter((line) => WRAPPER.test(line)).length;
  if (wrappers === 0) return { source, count: 0 };
  const result = eagerCommonJsWrappers(source);
  if (result.count !== wrappers) return { source, count: 0, skipped: `${result.count} of ${wrappers} wrappers matched` };
  try {
    await transform(result.source, { loader: 'js', format: 'esm', logLevel: 'silent' });
  } catch {
    return { source, count: 0, skipped: 'the rewritten chunk does not parse' };
  }
  return result;
}
