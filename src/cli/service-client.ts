/**
 * The controller side of the HTTP API for the small CLI clients (publish, status,
 * userdata): server URL from --server or BOOTSEAL_SERVER, controller token from --token-file
 * or BOOTSEAL_TOKEN, an optional private CA, and the same retries as the machine (5xx, 429,
 * no answer) under a short deadline. The token goes in the Authorization header only.
 */
import { readFile } from "node:fs/promises";
import { BootsealError } from "../errors.ts";
import { readTokenFile } from "../files/token-file.ts";
import { type HttpResponse, sendOk } from "../http/client.ts";
import { withRetry } from "../retry.ts";

export interface ClientSettings {
  readonly server: URL;
  readonly token: string | undefined;
  readonly ca: Buffer | undefined;
  readonly deadlineMs: number;
  readonly log: (line: string) => void;
}

export async function clientSettings(
  values: { server?: string; "token-file"?: string; "ca-file"?: string },
  env: Readonly<Record<string, string | undefined>>,
  log: (line: string) => void,
): Promise<ClientSettings> {
  const text = values.server ?? env.BOOTSEAL_SERVER;
  if (!text) throw new BootsealError("USAGE", "--server URL (or BOOTSEAL_SERVER) is required");
  let server: URL;
  try {
    server = new URL(text);
  } catch {
    throw new BootsealError("USAGE", "--server is not a URL");
  }
  if (server.protocol !== "http:" && server.protocol !== "https:")
    throw new BootsealError("USAGE", "--server must be http(s)");
  if (server.username || server.password)
    throw new BootsealError("USAGE", "--server must not carry credentials");
  const tokenFile = values["token-file"];
  const token =
    tokenFile !== undefined ? await readTokenFile(tokenFile) : env.BOOTSEAL_TOKEN?.trim() || undefined;
  const ca = values["ca-file"] !== undefined ? await readFile(values["ca-file"]) : undefined;
  return { server, token, ca, deadlineMs: 30_000, log };
}

/** `path` is appended to the server URL's path ("/v1/machines/ns/name/config"). */
export function serviceUrl(settings: ClientSettings, path: string, query?: Record<string, string>): URL {
  const url = new URL(settings.server.href);
  url.pathname = `${url.pathname.replace(/\/$/, "")}${path}`;
  for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, v);
  return url;
}

export async function call(
  settings: ClientSettings,
  method: "GET" | "PUT" | "DELETE" | "POST",
  url: URL,
  options: { body?: Uint8Array; headers?: Record<string, string> } = {},
): Promise<HttpResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (settings.token) headers.authorization = `Bearer ${settings.token}`;
  const { value } = await withRetry(
    ({ signal }) =>
      sendOk({
        method,
        url,
        headers,
        signal,
        body: options.body,
        ca: settings.ca,
      }),
    {
      what: `${method} ${url.origin}${url.pathname}`,
      deadline: Date.now() + settings.deadlineMs,
      attemptTimeoutMs: 15_000,
      backoff: { baseMs: 250, capMs: 4000 },
      // A first attempt that worked is not news for a one-shot client.
      log: (line) => {
        if (!/^attempt 1 .*: ok in /.test(line)) settings.log(line);
      },
    },
  );
  return value;
}
