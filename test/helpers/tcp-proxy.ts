/**
 * A TCP proxy in front of a peer that a test can take down and bring back, so a test can
 * make the store or a key service unreachable without ever stopping the shared peers.
 * Down: new connections are accepted and cut at once, and every open connection is cut.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface TcpProxy {
  readonly url: string;
  /** Connections accepted while up (a test can wait for traffic before taking it down). */
  readonly connections: () => number;
  setDown(down: boolean): void;
  close(): Promise<void>;
}

export async function tcpProxy(target: URL): Promise<TcpProxy> {
  const open = new Set<Socket>();
  const state = { down: false, connections: 0 };
  const server: Server = createServer((client) => {
    if (state.down) {
      client.destroy();
      return;
    }
    state.connections++;
    const upstream = connect(Number(target.port), target.hostname);
    open.add(client);
    open.add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}`,
    connections: () => state.connections,
    setDown(down: boolean) {
      state.down = down;
      if (down) for (const s of open) s.destroy();
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}
