/**
 * The one GET both cloud identity providers make to their link-local metadata service
 * (gcp.ts, azure.ts): a time limit of its own beside the caller's signal, a small body cap,
 * and short error details. No answer is KEY_UNAVAILABLE (retryable), as for any key service.
 */
import { BootsealError } from "../../errors.ts";
import { type HttpResponse, send } from "../../http/client.ts";

/** An identity token is 1-3 KiB; a larger answer is not one. */
export const MAX_METADATA_ANSWER_BYTES = 64 * 1024;

/** GET `url`; `where` names the service in messages. Never throws on a status. */
export async function metadataGet(
  url: URL,
  headers: Readonly<Record<string, string>>,
  timeoutMs: number,
  where: string,
  signal?: AbortSignal,
): Promise<HttpResponse> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let res: HttpResponse;
  try {
    res = await send({ method: "GET", url, headers, signal: combined });
  } catch (err) {
    const why = timeout.aborted && !signal?.aborted ? `no answer within ${timeoutMs} ms` : shortReason(err);
    throw new BootsealError("KEY_UNAVAILABLE", `${where}: unreachable (${why})`, { cause: err });
  }
  if (res.body.byteLength > MAX_METADATA_ANSWER_BYTES) {
    throw new BootsealError(
      "KEY_UNAVAILABLE",
      `${where}: answer larger than ${MAX_METADATA_ANSWER_BYTES} bytes`,
    );
  }
  return res;
}

function shortReason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const inner = /no answer \(([^)]*)\)/.exec(message);
  return inner ? (inner[1] as string) : message.slice(0, 120);
}

/** The first printable line of an error answer, short: the metadata servers say what is wrong. */
export function detail(res: HttpResponse): string {
  const text = new TextDecoder().decode(res.body.subarray(0, 2048));
  let line = text;
  try {
    const json = JSON.parse(text) as { error?: unknown; error_description?: unknown };
    const parts = [json.error, json.error_description].filter((p) => typeof p === "string");
    if (parts.length > 0) line = parts.join(": ");
  } catch {
    // plain text or HTML
  }
  const clean = line
    .replace(/<[^>]*>/g, " ")
    .replace(/[^\x20-\x7e]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
    .slice(0, 200);
  return clean ? `: ${clean}` : "";
}
