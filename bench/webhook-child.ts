// Child process for the admission bench: the real `etcd-guard webhook` entrypoint (config file,
// file store, HTTPS), so the RSS the parent reads is the webhook's own. Reports its URL over IPC.
import { runWebhookCommand } from '../webhook/server/main.js';

const [configFile, tlsCertFile, tlsKeyFile] = process.argv.slice(2);
if (!configFile || !tlsCertFile || !tlsKeyFile) {
  process.stderr.write('usage: webhook-child.ts CONFIG TLS_CERT TLS_KEY\n');
  process.exit(2);
}
// The parent asks for a breakdown of the memory it sees in /proc, for the report.
process.on('message', (message) => {
  if (message === 'memory') process.send?.({ memory: process.memoryUsage() });
});

const code = await runWebhookCommand(
  { configFile, listen: '127.0.0.1:0', tlsCertFile, tlsKeyFile, insecureHttp: false },
  process.env,
  {
    onListening: (server) => {
      // Readiness means the cache holds the target's evaluation, not just a listening socket.
      void server.cache.whenReady().then(() => process.send?.({ url: server.url }));
    },
  },
);
process.exitCode = code;
