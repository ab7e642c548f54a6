// Prints vitest's JSON report as one plain closing line ("N passed, N failed, N skipped") that CI
// tooling reads regardless of the runner, and exits with the suite's status.
import { readFileSync } from 'node:fs';

const file = process.argv[2];
const report = JSON.parse(readFileSync(file, 'utf8'));
const passed = report.numPassedTests ?? 0;
const failed = report.numFailedTests ?? 0;
const skipped = (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || report.success === false ? 1 : 0);
