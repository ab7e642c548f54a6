// Lists the functions longer than the code-shape limit (80 lines) in the product code, longest
// first: every function, method, constructor, accessor and arrow function, counted from its first
// line to its last (a nested function counts within its parent too). Tests and bench are not
// product code and are not read.
//
//   npx tsx scripts/long-functions.ts                       functions/ and webhook/, limit 80
//   npx tsx scripts/long-functions.ts --max 60 webhook      another limit or folder
//
// Exits 1 when it lists any, so it can serve as a check.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface LongFunction {
  file: string;
  line: number;
  name: string;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

/** A readable name: the declaration's own, else the variable or property it is assigned to. */
function nameOf(node: ts.Node, source: ts.SourceFile): string {
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) {
    return parent.name.getText(source);
  }
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(source).slice(0, 40)})`;
  return '(anonymous)';
}

export function longFunctions(files: readonly string[], maxLines: number): LongFunction[] {
  const found: LongFunction[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && (node as ts.Node & { body?: ts.Node }).body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        const lines = last - first + 1;
        if (lines > maxLines) found.push({ file, line: first + 1, name: nameOf(node, source), lines });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file));
}

function main(args: string[]): number {
  let maxLines = 80;
  const dirs: string[] = [];
  for (let index = 0; index < args.length; index += 1) {
    const arg = args[index] ?? '';
    if (arg === '--max') {
      maxLines = Number(args[(index += 1)]);
      if (!Number.isInteger(maxLines) || maxLines < 1) {
        process.stderr.write(`--max: want a whole number of lines (got ${JSON.stringify(args[index])})\n`);
        return 2;
      }
    } else dirs.push(arg);
  }
  const root = path.resolve(import.meta.dirname, '..');
  const files = (dirs.length > 0 ? dirs : ['functions', 'webhook']).flatMap((dir) => sourceFiles(path.resolve(root, dir)));
  const found = longFunctions(files, maxLines);
  for (const entry of found) {
    process.stdout.write(`${entry.lines} lines  ${path.relative(root, entry.file)}:${entry.line}  ${entry.name}\n`);
  }
  process.stdout.write(`${found.length} function(s) over ${maxLines} lines in ${files.length} files\n`);
  return found.length > 0 ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
