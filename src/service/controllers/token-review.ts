/**
 * Kubernetes ServiceAccount tokens, checked the way the API server's own webhook
 * authenticator does it: a TokenReview (authentication.k8s.io/v1) sent with the reviewer's
 * credential (which needs `system:auth-delegator`), through @kubernetes/client-node. The
 * service never verifies the JWT itself: only the API server knows whether the ServiceAccount
 * (and the pod or secret a bound token names) still exists.
 *
 * Positive answers are reused for a short bounded time (cacheTtlMs, never past the token's
 * own `exp`) by the token's SHA-256, in a bounded map, so a controller's burst costs one
 * review; negative ones are not kept (the failure counters of the auth plugin cover them),
 * and reviews of one token already under way are shared.
 */
import { readFile } from "node:fs/promises";
import type { AuthenticationV1Api, V1TokenReview } from "@kubernetes/client-node";
import type { KubernetesReview } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { sha256Hex } from "../tokens.ts";

/** What a review proved: the API server's name of the caller. */
export interface ReviewedUser {
  /** `system:serviceaccount:NS:NAME` for a ServiceAccount token. */
  readonly username: string;
}

export interface TokenReviewer {
  /**
   * UNAUTHORIZED when the API server says the token is not valid (or not for our audience);
   * KEY_UNAVAILABLE when it cannot be asked (down, timed out, refusing the reviewer).
   */
  review(token: string): Promise<ReviewedUser>;
}

/** Positive reviews kept at once (each well under 200 bytes). */
export const REVIEW_CACHE_MAX = 10_000;
/** One review's deadline: a hung API server must not hold controllers' requests for long. */
export const REVIEW_TIMEOUT_MS = 5_000;

/** Three base64url segments: anything else is not a JWT and is never sent to the API server. */
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export function looksLikeJwt(token: string): boolean {
  return token.length <= 16_384 && JWT.test(token);
}

/** The token's `exp` (ms), read without verifying: only to cut the cache short, never to trust. */
function expiryOf(token: string): number | undefined {
  try {
    const payload = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString("utf8"));
    return typeof payload?.exp === "number" ? payload.exp * 1000 : undefined;
  } catch {
    return undefined;
  }
}

function unavailable(message: string, cause?: unknown): BootsealError {
  return new BootsealError("KEY_UNAVAILABLE", `Kubernetes API server: ${message}; retry later`, { cause });
}

export function kubernetesReviewer(settings: KubernetesReview, now: () => number): TokenReviewer {
  const cache = new Map<string, { user: ReviewedUser; until: number }>();
  const inFlight = new Map<string, Promise<ReviewedUser>>();
  let client: { credential: string; api: AuthenticationV1Api } | undefined;

  async function api(): Promise<AuthenticationV1Api> {
    let credential: string;
    try {
      credential = (await readFile(settings.tokenFile, "utf8")).trim();
    } catch (cause) {
      throw unavailable("cannot read controllerAuth.kubernetes.tokenFile", cause);
    }
    if (client?.credential === credential) return client.api;
    // Loaded on first use: a service without Kubernetes controllers never loads the client.
    const { AuthenticationV1Api, KubeConfig } = await import("@kubernetes/client-node");
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [
        {
          name: "reviewer",
          server: settings.server,
          caData: settings.caPem ? Buffer.from(settings.caPem).toString("base64") : undefined,
        },
      ],
      users: [{ name: "reviewer", token: credential }],
      contexts: [{ name: "reviewer", cluster: "reviewer", user: "reviewer" }],
      currentContext: "reviewer",
    });
    client = { credential, api: kc.makeApiClient(AuthenticationV1Api) };
    return client.api;
  }

  // Only the deadline stops a review, not the caller going away: other requests may share it.
  async function ask(token: string): Promise<V1TokenReview> {
    const deadline = AbortSignal.timeout(REVIEW_TIMEOUT_MS);
    const body: V1TokenReview = {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenReview",
      spec: settings.audiences ? { token, audiences: [...settings.audiences] } : { token },
    };
    try {
      const client = await api();
      const { Observable } = await import("@kubernetes/client-node");
      return await client.createTokenReview(
        { body },
        {
          middleware: [
            {
              // The generated client's middleware speaks its own Observable stub.
              pre: (ctx) => {
                ctx.setSignal(deadline);
                return new Observable(Promise.resolve(ctx));
              },
              post: (ctx) => new Observable(Promise.resolve(ctx)),
            },
          ],
          middlewareMergeStrategy: "append",
        },
      );
    } catch (cause) {
      if (cause instanceof BootsealError) throw cause;
      const code = (cause as { code?: unknown }).code;
      // 401/403: the API server refuses the reviewer itself (missing system:auth-delegator, an
      // expired reviewer token): the service's problem, never the caller's.
      if (typeof code === "number") throw unavailable(`TokenReview answered ${code}`, cause);
      throw unavailable(deadline.aborted ? "no answer in time" : "unreachable", cause);
    }
  }

  async function reviewNow(token: string): Promise<ReviewedUser> {
    const answer = await ask(token);
    const status = answer.status;
    const username = status?.user?.username;
    if (!status?.authenticated || !username)
      throw new BootsealError("UNAUTHORIZED", "the Kubernetes API server did not accept this token");
    // The API server answers with the audiences it found the token valid for; with audiences
    // configured, one of ours must be among them (TokenReview's documented contract).
    if (settings.audiences && !status.audiences?.some((a) => settings.audiences?.includes(a)))
      throw new BootsealError("UNAUTHORIZED", "the token is not bound to this service's audience");
    return { username };
  }

  return {
    async review(token) {
      const key = sha256Hex(token);
      const at = now();
      const hit = cache.get(key);
      if (hit && hit.until > at) return hit.user;
      if (hit) cache.delete(key);
      const pending = inFlight.get(key);
      if (pending) return pending;
      const review = reviewNow(token).then((user) => {
        const until = Math.min(now() + settings.cacheTtlMs, expiryOf(token) ?? Number.POSITIVE_INFINITY);
        if (until > now()) {
          // Bounded: past the cap the oldest entry goes (Map insertion order).
          if (cache.size >= REVIEW_CACHE_MAX) cache.delete(cache.keys().next().value as string);
          cache.set(key, { user, until });
        }
        return user;
      });
      inFlight.set(key, review);
      try {
        return await review;
      } finally {
        inFlight.delete(key);
      }
    },
  };
}
