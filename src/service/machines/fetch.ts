/**
 * Fetching a machine's stored document. A machine (its token already checked against the
 * store by the auth plugin) spends one of the token's fetches; a controller spends nothing.
 * With one-time fetch `after-first-fetch`, the config is deleted once a machine has it.
 */

import { contentTypeOf, sniffFormat } from "../../envelope/document.ts";
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { etagMatches, quoteEtag, type ServiceContext } from "../context.ts";
import type { DocumentFormat } from "../machine-store.ts";
import type { TokenRecord } from "../tokens.ts";

export interface FetchRequest {
  /** The calling machine's checked token; null for a controller. */
  readonly token: TokenRecord | null;
  readonly ifNoneMatch: string | undefined;
  readonly signal: AbortSignal;
}

export type FetchResult =
  | { readonly kind: "not-modified"; readonly etag: string }
  | {
      readonly kind: "document";
      readonly etag: string;
      readonly format: DocumentFormat;
      readonly contentType: string;
      readonly body: Uint8Array;
    };

export async function fetchConfig(
  ctx: ServiceContext,
  m: MachineId,
  request: FetchRequest,
): Promise<FetchResult> {
  const { machines } = ctx;
  const obj = await machines.getConfig(m, { signal: request.signal });
  if (!obj) throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  const etag = quoteEtag(obj.etag);
  if (etagMatches(request.ifNoneMatch, etag)) return { kind: "not-modified", etag };
  if (request.token) {
    // UNAUTHORIZED (replaced meanwhile) or TOKEN_EXHAUSTED: the auth plugin counts them.
    await machines.consumeTokenUse(m, request.token.sha256);
    if (ctx.oneTimeFetch === "after-first-fetch") {
      // Conditional on the fetched version, so a publish that raced in is never deleted. The
      // token record stays (it can fetch nothing any more) so the machine can still report.
      if (await machines.deleteConfigIfUnchanged(m, obj.etag)) await machines.recordDeleted(m, ctx.now());
    }
  }
  const format = sniffFormat(obj.body);
  return { kind: "document", etag, format, contentType: contentTypeOf(format), body: obj.body };
}
