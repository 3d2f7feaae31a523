/**
 * Fetching a machine's stored document. A machine (its token already checked against the
 * store by the auth plugin) spends one of the token's fetches, usually while the config is
 * read (readWhileSpending); a controller spends nothing.
 * With one-time fetch `after-first-fetch`, the machine's fetch first claims the config with
 * one compare-and-swap on its token record (machine-store claimFirstFetch), and only the
 * winner gets the body; the config is deleted after. Every other fetch with that token, at
 * the same moment or later, is answered `already-fetched` (409 ALREADY_FETCHED, audited).
 */

import { contentTypeOf, sniffFormat } from "../../envelope/document.ts";
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import { etagMatches, quoteEtag, type ServiceContext } from "../context.ts";
import type { Versioned } from "../records.ts";
import type { DocumentFormat } from "../status-record.ts";
import { digestsEqual, type TokenRecord } from "../tokens.ts";

/** The body code of a second fetch of a one-time config (409); audited as `second-fetch`. */

export interface FetchRequest {
  /** The calling machine's checked token; null for a controller. */
  readonly token: TokenRecord | null;
  /** The stored record that token was checked against: its use is spent on this version. */
  readonly storedToken: Versioned<TokenRecord> | null;
  readonly ifNoneMatch: string | undefined;
  readonly signal: AbortSignal;
}

export type FetchResult =
  | { readonly kind: "not-modified"; readonly etag: string }
  /** One-time fetch: this token's one fetch was already taken (a second fetch attempted). */
  | { readonly kind: "already-fetched" }
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
  const oneTime = request.token !== null && ctx.oneTimeFetch === "after-first-fetch";
  if (oneTime && request.token?.firstFetch) return { kind: "already-fetched" };
  if (request.token?.configEtag !== undefined && !oneTime && request.ifNoneMatch === undefined) {
    const answer = await readWhileSpending(ctx, m, request, request.token);
    if (answer) return answer;
  }
  const obj = await machines.getConfig(m, { signal: request.signal });
  if (!obj) {
    // The config is gone: because this token's one fetch took it (re-read: the check above
    // saw the record from before a concurrent winner's claim), or it was never there.
    const stored = request.token ? await confirmToken(ctx, m, request) : null;
    if (oneTime && stored?.firstFetch) return { kind: "already-fetched" };
    throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  }
  const etag = quoteEtag(obj.etag);
  const storedToken = await checkBinding(ctx, m, request, etag);
  if (etagMatches(request.ifNoneMatch, etag)) {
    if (request.token) await confirmToken(ctx, m, request);
    return { kind: "not-modified", etag };
  }
  if (request.token && oneTime) {
    // The claim comes before any byte is sent: of concurrent fetches exactly one wins.
    // UNAUTHORIZED (replaced meanwhile) or TOKEN_EXHAUSTED: the auth plugin counts them.
    const seen = storedToken ?? undefined;
    const claim = await machines.claimFirstFetch(m, request.token.sha256, obj.etag, ctx.now(), {}, seen);
    if (!claim.claimed) return { kind: "already-fetched" };
    // Conditional on the fetched version, so a publish that raced in is never deleted. The
    // token record stays (it can fetch nothing any more) so the machine can still report.
    // The claim already makes the fetch one-time for this token: if the store fails the
    // delete now, the winner still gets its config (a controller sees it left in the status).
    try {
      if (await machines.deleteConfig(m, obj.etag)) await machines.recordDeleted(m, ctx.now());
    } catch (err) {
      // Left for the next publish or a controller's DELETE; a bug still surfaces.
      if (!(err instanceof BootsealError)) throw err;
    }
  } else if (request.token) {
    // UNAUTHORIZED (replaced meanwhile) or TOKEN_EXHAUSTED: the auth plugin counts them.
    await machines.consumeTokenUse(m, request.token.sha256, {}, storedToken ?? undefined);
  }
  return documentOf(obj.body, etag);
}

function documentOf(body: Uint8Array, etag: string): FetchResult {
  const format = sniffFormat(body);
  return { kind: "document", etag, format, contentType: contentTypeOf(format), body };
}

/**
 * The common fetch in one store round trip instead of two in a row: the token's use is spent
 * while the config is read. Only for a token bound to one config version, without
 * If-None-Match and not one-time `after-first-fetch` (whose claim names the version read),
 * where the answer is the document whenever the read finds the bound version. Otherwise (no
 * config, another version, a failed read) the use is given back and undefined returned: the
 * fetch is then answered as if it had read first, a TOKEN_EXHAUSTED or UNAUTHORIZED included.
 */
async function readWhileSpending(
  ctx: ServiceContext,
  m: MachineId,
  request: FetchRequest,
  token: TokenRecord,
): Promise<FetchResult | undefined> {
  const { machines } = ctx;
  const [read, spent] = await Promise.allSettled([
    machines.getConfig(m, { signal: request.signal }),
    // UNAUTHORIZED (replaced meanwhile) or TOKEN_EXHAUSTED: the auth plugin counts them.
    machines.consumeTokenUse(m, token.sha256, {}, request.storedToken ?? undefined),
  ]);
  const obj = read.status === "fulfilled" ? read.value : null;
  if (obj && quoteEtag(obj.etag) === token.configEtag) {
    if (spent.status === "rejected") throw spent.reason;
    return documentOf(obj.body, token.configEtag);
  }
  if (spent.status === "fulfilled") {
    try {
      await machines.refundTokenUse(m, token.sha256);
    } catch (err) {
      // The store failed the refund: this token has one fetch fewer; a bug still surfaces.
      if (!(err instanceof BootsealError)) throw err;
    }
  }
  if (read.status === "rejected") throw read.reason;
  return undefined;
}

/**
 * A token reaches the config it was issued for and no other (tokens.ts `configEtag`): not a
 * later publish, even before that publish's own token has replaced it. The auth check may have
 * used this replica's cached record, so a mismatch is confirmed against the store before it
 * refuses (RouteAuth `confirmedBy`). The token record to spend the use on.
 */
async function checkBinding(
  ctx: ServiceContext,
  m: MachineId,
  request: FetchRequest,
  etag: string,
): Promise<Versioned<TokenRecord> | null> {
  const bound = request.token?.configEtag;
  if (bound === undefined || bound === etag) return request.storedToken;
  const stored = await ctx.machines.readToken(m, { signal: request.signal });
  if (
    !stored ||
    !request.token ||
    !digestsEqual(stored.value.sha256, request.token.sha256) ||
    (stored.value.configEtag !== undefined && stored.value.configEtag !== etag)
  ) {
    throw new BootsealError("UNAUTHORIZED", "the bootstrap token was issued for another published config");
  }
  return stored;
}

/**
 * The token record as the store holds it, still this token's: for the answers that no
 * conditional write of the token record confirms (the check may have used this replica's
 * cached version, RouteAuth `confirmedBy`).
 */
async function confirmToken(ctx: ServiceContext, m: MachineId, request: FetchRequest): Promise<TokenRecord> {
  const stored = await ctx.machines.readToken(m, { signal: request.signal });
  if (!stored || !request.token || !digestsEqual(stored.value.sha256, request.token.sha256)) {
    throw new BootsealError("UNAUTHORIZED", "the bootstrap token was revoked or replaced");
  }
  return stored.value;
}
