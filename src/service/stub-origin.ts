/**
 * Where a user-data stub tells the machine to find the service. The stub carries the machine's
 * bootstrap token and points its fetcher at this URL, so nothing the client sends may choose it:
 * `publicUrl` when it is set; without it only a loopback listener answers, with its own address
 * (the embedded default on 127.0.0.1), and the Host header is never read. Any other listener
 * refuses until `publicUrl` is set (a balancer or an ingress in front would otherwise make every
 * stub name whatever Host the caller sent).
 */
import { isIP } from "node:net";
import { BootsealError } from "../errors.ts";

export interface ListenerSocket {
  readonly localAddress?: string | undefined;
  readonly localPort?: number | undefined;
}

function isLoopback(address: string): boolean {
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  if (isIP(v4) === 4) return v4.startsWith("127.");
  return address === "::1";
}

/**
 * The stub's service URL: `publicUrl`, or the loopback listener's own origin. A request injected
 * in process (no local address: tests, never the network) is answered as loopback.
 */
export function stubOrigin(publicUrl: string | undefined, protocol: string, socket: ListenerSocket): string {
  if (publicUrl !== undefined) return publicUrl;
  const { localAddress, localPort } = socket;
  if (localAddress === undefined) return `${protocol}://127.0.0.1${localPort ? `:${localPort}` : ""}`;
  if (!isLoopback(localAddress)) {
    throw new BootsealError(
      "UNSUPPORTED",
      "user-data stubs need publicUrl (BOOTSEAL_PUBLIC_URL): the URL machines reach this service at; without it only a loopback listener makes stubs",
    );
  }
  const host = localAddress.startsWith("::ffff:") ? localAddress.slice(7) : localAddress;
  return `${protocol}://${isIP(host) === 6 ? `[${host}]` : host}:${localPort}`;
}
