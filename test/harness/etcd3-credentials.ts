// The grpc-js channel credentials etcd3 builds for an https client, as the probe session gets
// them, for the shim tests of grpc-js's credentials internals.
import { Etcd3 } from 'etcd3';
import { onlyHost } from '../../functions/adapters/etcd3-host-shim.js';
import { selfSigned } from './in-memory-cert.js';

/** A GrpcUri as grpc-js's channel hands it to _createSecureConnector. */
export function grpcTarget(hostPort: string): { scheme: string; authority: undefined; path: string } {
  return { scheme: 'dns', authority: undefined, path: hostPort };
}

/** Credentials of an https client trusting a fresh self-signed CA; `close` closes the client. */
export function etcd3TlsCredentials(): { credentials: unknown; close: () => void } {
  const ca = selfSigned('etcd-guard-shim-test-ca');
  const client = new Etcd3({ hosts: 'https://127.0.0.1:2379', credentials: { rootCertificate: ca.cert } });
  return { credentials: onlyHost(client)?.channelCredentials, close: () => client.close() };
}
