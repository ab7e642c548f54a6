// The grpc-js that etcd3 itself loads (etcd-guard does not depend on grpc-js directly), for shim
// tests that compare with grpc-js's own constants.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

export const etcd3GrpcJs = createRequire(require.resolve('etcd3'))('@grpc/grpc-js') as {
  connectivityState: Record<string, number>;
};

/** grpc-js's version as installed under etcd3. */
export const etcd3GrpcJsVersion = (createRequire(require.resolve('etcd3'))('@grpc/grpc-js/package.json') as { version: string })
  .version;
