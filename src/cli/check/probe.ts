/**
 * One request of a check: one attempt, no retries (a check reports what it sees now), under
 * the client's `--deadline`, with its token and private CA (../service-client.ts settings).
 */
import { type HttpResponse, send } from "../../http/client.ts";
import { type ClientSettings, serviceUrl } from "../service-client.ts";

export async function probe(
  settings: ClientSettings,
  method: "GET" | "POST",
  path: string,
  options: { auth?: boolean; maxBytes?: number; base?: URL } = {},
): Promise<HttpResponse> {
  const url = options.base
    ? new URL(`${options.base.href.replace(/\/$/, "")}${path}`)
    : serviceUrl(settings, path);
  const headers: Record<string, string> = {};
  if (options.auth && settings.token) headers.authorization = `Bearer ${settings.token}`;
  return send({
    method,
    url,
    headers,
    signal: AbortSignal.timeout(settings.deadlineMs),
    ca: settings.ca,
    ...(options.maxBytes ? { maxBytes: options.maxBytes } : {}),
  });
}

/** The `{code, message}` of an error answer, or the status alone. */
export function answerError(res: HttpResponse): string {
  try {
    const body = JSON.parse(new TextDecoder().decode(res.body)) as { code?: unknown; message?: unknown };
    if (typeof body.message === "string")
      return `HTTP ${res.status} ${String(body.code ?? "")}: ${body.message}`.replace(" :", ":");
  } catch {
    // not JSON
  }
  return `HTTP ${res.status}`;
}
