// A small evaluator of the CEL that manifests/ ships in matchConditions, so the manifests tests can
// evaluate those exact expressions over real objects. It covers what they use and refuses the rest
// (a parse error names it): identifiers, field selection, indexing a map by a key, `has()`, `.exists(v, p)`,
// `.startsWith()`, `.matches()` (RE2's partial match; the patterns used are plain), `in`, `==`,
// `!=`, `!`, `&&`, `||`, parentheses, single-quoted strings, null, true and false. Semantics as
// cel-spec's langdef.md says: selecting a missing key is an error; `&&` and `||` are commutative
// and absorb an error when the other side decides (false && error is false); `exists` is true
// when any element is, an error when none is and some erred. An error is what the apiserver treats
// as the failure policy's call, so the tests require none.
export class CelError extends Error {}

type Value = unknown;
type Node =
  | { t: 'lit'; v: Value }
  | { t: 'id'; name: string }
  | { t: 'sel'; of: Node; field: string }
  | { t: 'index'; of: Node; key: Node }
  | { t: 'call'; fn: string; target: Node | null; args: Node[] }
  | { t: 'not'; of: Node }
  | { t: 'bin'; op: '&&' | '||' | '==' | '!=' | 'in'; l: Node; r: Node };

const TOKEN = /\s*(?:('(?:[^'\\]|\\.)*')|([A-Za-z_][A-Za-z0-9_]*)|(&&|\|\||==|!=|[!().,[\]]))/y;

function tokenize(source: string): string[] {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < source.length) {
    if (/^\s*$/.test(source.slice(TOKEN.lastIndex))) break;
    const at = TOKEN.lastIndex;
    const match = TOKEN.exec(source);
    if (match === null) throw new CelError(`unsupported CEL at ${at}: ${source.slice(at, at + 20)}`);
    tokens.push(match[1] ?? match[2] ?? match[3] ?? '');
  }
  return tokens;
}

function parse(source: string): Node {
  const tokens = tokenize(source);
  let index = 0;
  const peek = () => tokens[index];
  const take = (expected?: string): string => {
    const token = tokens[index++];
    if (token === undefined || (expected !== undefined && token !== expected)) {
      throw new CelError(`expected ${expected ?? 'a token'} at token ${index - 1}, got ${token ?? 'the end'}`);
    }
    return token;
  };
  const args = (): Node[] => {
    const list: Node[] = [];
    take('(');
    while (peek() !== ')') {
      list.push(or());
      if (peek() === ',') take(',');
    }
    take(')');
    return list;
  };
  const primary = (): Node => {
    const token = take();
    if (token === '(') {
      const inner = or();
      take(')');
      return inner;
    }
    if (token.startsWith("'")) return { t: 'lit', v: token.slice(1, -1).replace(/\\(.)/g, '$1') };
    if (token === 'null') return { t: 'lit', v: null };
    if (token === 'true' || token === 'false') return { t: 'lit', v: token === 'true' };
    if (!/^[A-Za-z_]/.test(token)) throw new CelError(`unexpected ${token}`);
    return peek() === '(' ? { t: 'call', fn: token, target: null, args: args() } : { t: 'id', name: token };
  };
  const member = (): Node => {
    let node = primary();
    while (peek() === '.' || peek() === '[') {
      if (take() === '[') {
        node = { t: 'index', of: node, key: or() };
        take(']');
        continue;
      }
      const field = take();
      node = peek() === '(' ? { t: 'call', fn: field, target: node, args: args() } : { t: 'sel', of: node, field };
    }
    return node;
  };
  const unary = (): Node => (peek() === '!' ? (take('!'), { t: 'not', of: unary() }) : member());
  const relation = (): Node => {
    const left = unary();
    const op = peek();
    if (op === '==' || op === '!=' || op === 'in') {
      take();
      return { t: 'bin', op, l: left, r: unary() };
    }
    return left;
  };
  const and = (): Node => {
    let node = relation();
    while (peek() === '&&') node = (take(), { t: 'bin', op: '&&', l: node, r: relation() });
    return node;
  };
  const or = (): Node => {
    let node = and();
    while (peek() === '||') node = (take(), { t: 'bin', op: '||', l: node, r: and() });
    return node;
  };
  const tree = or();
  if (index !== tokens.length) throw new CelError(`unexpected ${tokens[index]} after the expression`);
  return tree;
}

type Env = Readonly<Record<string, Value>>;
const isMap = (value: Value): value is Record<string, Value> =>
  value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof CelError);
const fail = (message: string) => new CelError(message);

function select(of: Value, field: string): Value {
  if (of instanceof CelError) return of;
  if (!isMap(of)) return fail(`no such key ${field} (not a map)`);
  return Object.prototype.hasOwnProperty.call(of, field) ? of[field] : fail(`no such key: ${field}`);
}

function logic(op: '&&' | '||', left: Value, right: () => Value): Value {
  const decides = op === '||';
  if (left === decides) return decides;
  const r = right();
  if (r === decides) return decides;
  for (const side of [left, r]) if (side instanceof CelError) return side;
  for (const side of [left, r]) if (typeof side !== 'boolean') return fail(`no such overload: ${op} on ${typeof side}`);
  return !decides;
}

function callMethod(node: Extract<Node, { t: 'call' }>, env: Env): Value {
  const target = evaluate(node.target as Node, env);
  if (target instanceof CelError) return target;
  if (node.fn === 'exists') {
    const [variable, predicate] = node.args;
    if (variable?.t !== 'id' || predicate === undefined || !Array.isArray(target)) return fail('exists needs a list and (v, p)');
    let error: CelError | null = null;
    for (const element of target) {
      const result = evaluate(predicate, { ...env, [variable.name]: element });
      if (result === true) return true;
      if (result instanceof CelError) error ??= result;
      else if (result !== false) error ??= fail('exists predicate is not a bool');
    }
    return error ?? false;
  }
  const arg = node.args[0] === undefined ? undefined : evaluate(node.args[0], env);
  if (arg instanceof CelError) return arg;
  if (typeof target !== 'string' || typeof arg !== 'string') return fail(`no such overload: ${node.fn}`);
  if (node.fn === 'startsWith') return target.startsWith(arg);
  if (node.fn === 'matches') return new RegExp(arg).test(target);
  return fail(`unsupported function ${node.fn}`);
}

function evaluate(node: Node, env: Env): Value {
  switch (node.t) {
    case 'lit':
      return node.v;
    case 'id':
      return Object.prototype.hasOwnProperty.call(env, node.name) ? env[node.name] : fail(`undeclared reference ${node.name}`);
    case 'sel':
      return select(evaluate(node.of, env), node.field);
    case 'index': {
      // Only a map indexed by a string key is used; a missing key is an error, as for a selection.
      const key = evaluate(node.key, env);
      if (key instanceof CelError) return key;
      return typeof key === 'string' ? select(evaluate(node.of, env), key) : fail('no such overload: index');
    }
    case 'not': {
      const value = evaluate(node.of, env);
      return typeof value === 'boolean' ? !value : value instanceof CelError ? value : fail('! on a non-bool');
    }
    case 'call': {
      if (node.target !== null) return callMethod(node, env);
      const operand = node.args[0];
      if (node.fn !== 'has' || operand?.t !== 'sel') return fail(`unsupported function ${node.fn}`);
      const of = evaluate(operand.of, env);
      if (of instanceof CelError) return of;
      return isMap(of) ? Object.prototype.hasOwnProperty.call(of, operand.field) : fail('has() on a non-map');
    }
    case 'bin': {
      if (node.op === '&&' || node.op === '||') return logic(node.op, evaluate(node.l, env), () => evaluate(node.r, env));
      const l = evaluate(node.l, env);
      const r = evaluate(node.r, env);
      if (l instanceof CelError) return l;
      if (r instanceof CelError) return r;
      if (node.op === 'in') {
        if (isMap(r)) return typeof l === 'string' && Object.prototype.hasOwnProperty.call(r, l);
        if (Array.isArray(r)) return r.includes(l);
        return fail('in on a non-container');
      }
      if ((typeof l === 'object' && l !== null) || (typeof r === 'object' && r !== null)) {
        return node.op === '!=' ? !(l === null && r === null) : false;
      }
      return node.op === '==' ? l === r : l !== r;
    }
  }
}

/** The expression's value over the variables (a CelError when CEL would error). */
export function evaluateCel(expression: string, variables: Env): Value {
  return evaluate(parse(expression), variables);
}
