// A member's maintenance Status exactly as it sent it, undecoded: what etcd3's rpc.proto drops
// (etcd 3.6's fields) is still in these bytes, for functions/adapters/etcd-status-extras.ts.
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');
const grpc = createRequire(path.join(ROOT, 'node_modules/etcd3/package.json'))('@grpc/grpc-js') as typeof import('@grpc/grpc-js');

export async function rawStatus(endpoint: string, tls: { caFile: string; certFile: string; keyFile: string }): Promise<Buffer> {
  const [ca, key, cert] = await Promise.all([readFile(tls.caFile), readFile(tls.keyFile), readFile(tls.certFile)]);
  const client = new grpc.Client(new URL(endpoint).host, grpc.credentials.createSsl(ca, key, cert));
  try {
    return await new Promise<Buffer>((resolve, reject) =>
      client.makeUnaryRequest(
        '/etcdserverpb.Maintenance/Status',
        () => Buffer.alloc(0),
        (bytes: Buffer) => bytes,
        {},
        { deadline: Date.now() + 5000 },
        (error, bytes) => (error || bytes === undefined ? reject(error ?? new Error('no Status bytes')) : resolve(bytes)),
      ),
    );
  } finally {
    client.close();
  }
}
