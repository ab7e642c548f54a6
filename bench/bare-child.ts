// Child process for the admission baseline: a bare express HTTPS server that parses the JSON body
// and answers one fixed AdmissionReview. What any webhook costs before it decides anything.
import express from 'express';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const [tlsCertFile, tlsKeyFile, uid] = process.argv.slice(2);
if (!tlsCertFile || !tlsKeyFile || !uid) {
  process.stderr.write('usage: bare-child.ts TLS_CERT TLS_KEY UID\n');
  process.exit(2);
}
const fixedReview = {
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  response: { uid, allowed: true },
};
const app = express();
app.use(express.json({ limit: '3mb' }));
app.post('/validate', (_req, res) => {
  res.json(fixedReview);
});
const server = https.createServer({ cert: readFileSync(tlsCertFile), key: readFileSync(tlsKeyFile) }, app);
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.send?.({ url: `https://127.0.0.1:${port}` });
});

process.on('message', (message) => {
  if (message === 'memory') process.send?.({ memory: process.memoryUsage() });
});
