// Connections an attacker holds: silent TCP sockets from one loopback address, each re-opened as
// soon as the server cuts it, like an attacker who wants a connection cap for himself.
import net from 'node:net';

export interface HeldConnections {
  /** Connects that succeeded so far (re-opened ones included). */
  opened(): number;
  /** Sockets connected and not closed now. */
  alive(): number;
  /** Sockets the server (or the network) closed so far. */
  cut(): number;
  stop(): void;
}

export function holdConnections(target: { host: string; port: number }, localAddress: string, count: number): HeldConnections {
  let active = true;
  let opened = 0;
  let alive = 0;
  let cut = 0;
  const sockets = new Set<net.Socket>();
  const open = () => {
    if (!active) return;
    const socket = net.connect({ host: target.host, port: target.port, localAddress });
    let connected = false;
    sockets.add(socket);
    socket.on('connect', () => {
      connected = true;
      opened += 1;
      alive += 1;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      sockets.delete(socket);
      if (connected) alive -= 1;
      cut += 1;
      // Not in this tick: a refused connect must not spin the test's own event loop.
      if (active) setImmediate(open);
    });
  };
  for (let index = 0; index < count; index += 1) open();
  return {
    opened: () => opened,
    alive: () => alive,
    cut: () => cut,
    stop: () => {
      active = false;
      for (const socket of sockets) socket.destroy();
    },
  };
}
