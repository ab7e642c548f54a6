#!/usr/bin/env node
// Runs the TypeScript CLI directly through tsx, so `npx etcd-guard` works right after `npm ci`
// without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../functions/cli.ts');
process.exitCode = await main(process.argv.slice(2), process.env);
