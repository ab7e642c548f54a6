// A per-peer connection limit under the server's global one. The global cap (maxConnections)
// keeps the process inside its file descriptors, but alone it is a prize: one address that holds
// the whole cap — idle sockets re-opened as soon as they are cut — left no connection for the
// apiserver, and 0 of 22 admission reviews were answered. A socket over its peer's share is
// destroyed on accept, before its TLS handshake costs anything.
import net from 'node:net';
import type { Server } from 'node:net';

/**
 * A quarter of MAX_CONNECTIONS (512). Why this number: the peers that matter are one to a few
 * kube-apiservers, and behind konnectivity or an egress proxy all of them share ONE address.
 * client-go's transport keeps up to 25 idle keep-alive connections per host and opens more for
 * concurrent reviews (HTTP/1.1: one in-flight review per connection), so three apiservers behind
 * one address can hold ~75 idle plus their bursts: 128 leaves them room. One attacker address
 * gets at most a quarter of the cap, and the other 384 connections stay free for everyone else.
 */
export const MAX_CONNECTIONS_PER_PEER = 128;

/**
 * The key connections are counted under: the IPv4 address (also when it arrives IPv4-mapped),
 * or the /64 of an IPv6 address, since one host commonly owns a whole /64.
 */
export function peerKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (net.isIPv4(address)) return address;
  if (!net.isIPv6(address)) return address;
  const withoutZone = address.split('%')[0] ?? address;
  const [head = '', tail] = withoutZone.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined
      ? headGroups
      : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return `${groups
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

export interface PeerLimit {
  /** Open connections per peer key now (for tests). */
  open(): ReadonlyMap<string, number>;
  /** Connections refused because their peer was at its limit. */
  refused(): number;
}

/** Counts the server's connections per peer and destroys one over `maxPerPeer` at once. */
export function limitConnectionsPerPeer(server: Server, maxPerPeer: number, onRefused?: (peer: string) => void): PeerLimit {
  if (!(Number.isInteger(maxPerPeer) && maxPerPeer >= 1)) {
    throw new RangeError(`maxConnectionsPerPeer must be a whole number >= 1 (got ${String(maxPerPeer)})`);
  }
  const open = new Map<string, number>();
  let refused = 0;
  server.on('connection', (socket: net.Socket) => {
    const peer = peerKey(socket.remoteAddress);
    const count = open.get(peer) ?? 0;
    if (count >= maxPerPeer) {
      refused += 1;
      socket.destroy();
      onRefused?.(peer);
      return;
    }
    open.set(peer, count + 1);
    socket.once('close', () => {
      const left = (open.get(peer) ?? 1) - 1;
      if (left <= 0) open.delete(peer);
      else open.set(peer, left);
    });
  });
  return { open: () => open, refused: () => refused };
}
