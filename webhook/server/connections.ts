// The server's connection cap and a per-peer limit under it. The global cap keeps the process
// inside its file descriptors, but alone it is a prize: one address that holds the whole cap —
// idle sockets re-opened as soon as they are cut — left no connection for the apiserver. A
// per-peer limit alone is not enough either: a few addresses at their limit fill the cap between
// them. So when the server is full, the peer holding the most gives up its oldest connection to a
// peer holding fewer. A socket that is refused is destroyed on accept, before its TLS handshake
// costs anything.
import net from 'node:net';
import type { Server } from 'node:net';

/**
 * A quarter of MAX_CONNECTIONS (512). Why this number: the peers that matter are one to a few
 * kube-apiservers, and behind konnectivity or an egress proxy all of them share ONE address.
 * client-go's transport keeps up to 25 idle keep-alive connections per host and opens more for
 * concurrent reviews (HTTP/1.1: one in-flight review per connection), so three apiservers behind
 * one address can hold ~75 idle plus their bursts: 128 leaves them room. One attacker address
 * gets at most a quarter of the cap; several together are cut back when a lighter peer needs room.
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
  /** Connections refused because their peer was at its limit, or held the most when the server was full. */
  refused(): number;
  /** Connections cut to make room for a peer holding fewer. */
  evicted(): number;
}

export interface ConnectionLimits {
  /** Open connections of the whole server. */
  maxConnections: number;
  /** Open connections of one peer (peerKey). */
  maxPerPeer: number;
}

function checkLimit(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 1)) {
    throw new RangeError(`${name} must be a whole number >= 1 (got ${String(value)})`);
  }
}

/**
 * Counts the server's connections per peer and keeps both bounds. A connection over its peer's
 * limit is destroyed at once. When the server is full, the new connection's peer is weighed
 * against the peer holding the most: if that one holds at least two more, its oldest connection
 * is cut to make room (the next review re-opens it), else the new one is refused. So a few
 * addresses that each hold their per-peer share cannot fill the server between them: whoever
 * holds less — the apiserver, from its own addresses — always gets a connection, and only the
 * heaviest holder ever loses one. Node's own server.maxConnections must stay unset: it drops a
 * connection before any listener could make room for it.
 */
export function limitConnections(
  server: Server,
  limits: ConnectionLimits,
  onRefused?: (peer: string, why: 'peer-limit' | 'server-full') => void,
): PeerLimit {
  checkLimit('maxConnections', limits.maxConnections);
  checkLimit('maxConnectionsPerPeer', limits.maxPerPeer);
  // Sets keep insertion order: the first socket of a peer's set is its oldest.
  const byPeer = new Map<string, Set<net.Socket>>();
  let total = 0;
  let refused = 0;
  let evicted = 0;
  const forget = (peer: string, socket: net.Socket) => {
    const held = byPeer.get(peer);
    if (held?.delete(socket) !== true) return;
    total -= 1;
    if (held.size === 0) byPeer.delete(peer);
  };
  const heaviest = (): [string, Set<net.Socket>] | undefined => {
    let most: [string, Set<net.Socket>] | undefined;
    for (const entry of byPeer) if (most === undefined || entry[1].size > most[1].size) most = entry;
    return most;
  };
  const refuse = (socket: net.Socket, peer: string, why: 'peer-limit' | 'server-full') => {
    refused += 1;
    socket.destroy();
    onRefused?.(peer, why);
  };
  server.on('connection', (socket: net.Socket) => {
    const peer = peerKey(socket.remoteAddress);
    const count = byPeer.get(peer)?.size ?? 0;
    if (count >= limits.maxPerPeer) return refuse(socket, peer, 'peer-limit');
    if (total >= limits.maxConnections) {
      const most = heaviest();
      const oldest = most?.[1].values().next().value;
      if (most === undefined || oldest === undefined || most[1].size < count + 2) return refuse(socket, peer, 'server-full');
      forget(most[0], oldest);
      evicted += 1;
      oldest.destroy();
    }
    let held = byPeer.get(peer);
    if (held === undefined) byPeer.set(peer, (held = new Set()));
    held.add(socket);
    total += 1;
    socket.once('close', () => forget(peer, socket));
  });
  return {
    open: () => new Map([...byPeer].map(([peer, held]) => [peer, held.size])),
    refused: () => refused,
    evicted: () => evicted,
  };
}
