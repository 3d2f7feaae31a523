/**
 * The controller side of the HTTP API for the small CLI clients (publish, status,
 * userdata): server URL from --server or BOOTSEAL_SERVER, controller token from --token-file
 * or BOOTSEAL_TOKEN, an optional private CA, and the same retries as the machine (5xx, 429,
 * no answer) under `--deadline` (default 30 s). The token goes in the Authorization header only.
 *
 * A failure is one BootsealError whose message names the request once and says how many
 * attempts it took: main.ts prints it as the command's one error line. The per-attempt log
 * is progress, so it appears only with `--verbose` (./verbose.ts).
 */
import { readFile } from "node:fs/promises";
import { parseFlagDuration } from "../duration.ts";
import { BootsealError, isBootsealError } from "../errors.ts";
import { readTokenFile } from "../files/token-file.ts";
import { type HttpResponse, sendOk } from "../http/client.ts";
import { withRetry } from "../retry.ts";
import type { CliIo } from "./command.ts";
import { DEFAULT_CLIENT_DEADLINE } from "./flag-groups.ts";
import { verbose } from "./verbose.ts";

const ATTEMPT_TIMEOUT_MS = 15_000;

export interface ClientSettings {
  readonly server: URL;
  readonly token: string | undefined;
  readonly ca: Buffer | undefined;
  readonly deadlineMs: number;
  /** Per-attempt lines (retries); --verbose shows them. */
  readonly log: (line: string) => void;
}

/** The service's base URL (--server or BOOTSEAL_SERVER): http(s), no credentials in it. */
export function serverUrl(text: string | undefined): URL {
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
  return server;
}

export async function clientSettings(
  values: { server?: string; "token-file"?: string; "ca-file"?: string; deadline?: string },
  io: CliIo,
  command: string,
): Promise<ClientSettings> {
  const env = io.env;
  const server = serverUrl(values.server ?? env.BOOTSEAL_SERVER);
  const deadlineMs = parseFlagDuration(values.deadline ?? DEFAULT_CLIENT_DEADLINE, "deadline");
  if (!(deadlineMs > 0)) throw new BootsealError("USAGE", "--deadline must be longer than 0");
  const tokenFile = values["token-file"];
  const token =
    tokenFile !== undefined ? await readTokenFile(tokenFile) : env.BOOTSEAL_TOKEN?.trim() || undefined;
  const ca = values["ca-file"] !== undefined ? await readFile(values["ca-file"]) : undefined;
  return { server, token, ca, deadlineMs, log: (line) => verbose(io, `${command}: ${line}`) };
}

/** `path` is appended to the server URL's path ("/v1/machines/ns/name/config"). */
export function serviceUrl(settings: ClientSettings, path: string, query?: Record<string, string>): URL {
  const url = new URL(settings.server.href);
  url.pathname = `${url.pathname.replace(/\/$/, "")}${path}`;
  for (const [k, v] of Object.entries(query ?? {})) url.searchParams.set(k, v);
  return url;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)}s`;
}

/**
 * The request under the retry policy. Its failure keeps the last attempt's code and message
 * (which name the request: "GET https://host/v1/...: HTTP 404: ...") and adds the attempts
 * and the code: `GET URL: no answer (ECONNREFUSED); 5 attempts in 2.0s (SERVICE_UNAVAILABLE)`.
 */
export async function call(
  settings: ClientSettings,
  method: "GET" | "PUT" | "DELETE" | "POST",
  url: URL,
  options: { body?: Uint8Array; headers?: Record<string, string> } = {},
): Promise<HttpResponse> {
  const headers: Record<string, string> = { ...options.headers };
  if (settings.token) headers.authorization = `Bearer ${settings.token}`;
  const started = Date.now();
  let attempts = 0;
  try {
    const { value } = await withRetry(
      ({ signal, attempt }) => {
        attempts = attempt;
        return sendOk({ method, url, headers, signal, body: options.body, ca: settings.ca });
      },
      {
        what: `${method} ${url.origin}${url.pathname}`,
        deadline: started + settings.deadlineMs,
        attemptTimeoutMs: ATTEMPT_TIMEOUT_MS,
        backoff: { baseMs: 250, capMs: 4000 },
        // The last failure as it is (it names the request): the wrapper below adds the count.
        rethrowLast: true,
        // A first attempt that worked is not news for a one-shot client.
        log: (line) => {
          if (!/^attempt 1 .*: ok in /.test(line)) settings.log(line);
        },
      },
    );
    return value;
  } catch (err) {
    if (!isBootsealError(err)) throw err;
    const tries =
      attempts > 1 ? `; gave up after ${attempts} attempts in ${seconds(Date.now() - started)}` : "";
    throw new BootsealError(err.code, `${err.message}${tries} (${err.code})`, { cause: err });
  }
}
