/**
 * Authentication and authorisation, as an onRequest hook driven by each route's
 * `config.auth`, so handlers never repeat it and unauthenticated bodies are never parsed.
 *
 * - Controllers: `Authorization: Bearer <token>`, compared by SHA-256 with
 *   crypto.timingSafeEqual against every configured hash; or, with `tls.clientCa`, a verified
 *   client certificate whose subject CN is a controller's name. Each route names the scope it
 *   needs; `admin` implies every scope. Missing scope: 403 FORBIDDEN.
 * - Machines: a bootstrap token `bst.<ns>.<name>.<secret>` (tokens.ts). A token naming another
 *   machine is refused here (403) without a store read; the hash, expiry and uses are checked
 *   against the store by the route (checkMachine), after the params were validated.
 * - Failed authentications are counted per source address with @fastify/rate-limit; past
 *   `rateLimit.authFailuresPerMinute` every authenticated route answers 429 with Retry-After
 *   for that address until the minute is over.
 */
import type { TLSSocket } from "node:tls";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { ControllerConfig } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import type { MachineStore } from "../machine-store.ts";
import { checkToken } from "../machine-store.ts";
import type { MachineRef } from "../names.ts";
import { type Principal, stateOf } from "../request-state.ts";
import {
  digestsEqual,
  looksLikeBootstrapToken,
  parseBootstrapToken,
  sha256Hex,
  type TokenRecord,
} from "../tokens.ts";

type Limiter = (
  request: FastifyRequest,
  options?: { increment?: boolean },
) => Promise<{ isAllowed: boolean; remaining?: number; ttlInSeconds?: number; isExceeded?: boolean }>;

export interface AuthGuard {
  /** A machine principal's token checked against its stored record (hash, machine, expiry). */
  checkMachine(request: FastifyRequest, reply: FastifyReply, now: Date): Promise<TokenRecord>;
  /** Counts an authentication failure found by a route; rethrows it, or RATE_LIMITED. */
  fail(request: FastifyRequest, reply: FastifyReply, err: BootsealError): Promise<never>;
}

export interface AuthOptions {
  readonly controllers: readonly ControllerConfig[];
  readonly mutualTls: boolean;
  readonly authFailuresPerMinute: number;
  readonly machines: MachineStore;
}

const AUTH_FAILURE_CODES = new Set(["UNAUTHORIZED", "TOKEN_EXPIRED", "TOKEN_EXHAUSTED"]);

function findController(
  controllers: readonly ControllerConfig[],
  token: string,
): ControllerConfig | undefined {
  const digest = sha256Hex(token);
  let found: ControllerConfig | undefined;
  // Compare with every hash, not until the first match, so timing says nothing about the list.
  for (const c of controllers) {
    if (c.tokenSha256 && digestsEqual(c.tokenSha256, digest) && !found) found = c;
  }
  return found;
}

function certificateController(request: FastifyRequest, controllers: readonly ControllerConfig[]) {
  const socket = request.raw.socket as Partial<TLSSocket>;
  if (!socket.encrypted || !socket.authorized || typeof socket.getPeerCertificate !== "function")
    return undefined;
  const cn = socket.getPeerCertificate().subject?.CN;
  const name = Array.isArray(cn) ? cn[0] : cn;
  return name ? controllers.find((c) => c.name === name) : undefined;
}

function routeMachine(request: FastifyRequest): MachineRef | null {
  const p = request.params as { ns?: string; name?: string } | undefined;
  return p?.ns && p.name ? { namespace: p.ns, name: p.name } : null;
}

export function authPlugin(app: FastifyInstance, options: AuthOptions): AuthGuard {
  const limiter = (app as unknown as { createRateLimit(o: object): Limiter }).createRateLimit({
    max: options.authFailuresPerMinute,
    timeWindow: 60_000,
    keyGenerator: (request: FastifyRequest) => request.ip,
  });

  async function fail(request: FastifyRequest, reply: FastifyReply, err: BootsealError): Promise<never> {
    const counted = await limiter(request);
    if (!counted.isAllowed && counted.isExceeded) {
      void reply.header("retry-after", String(counted.ttlInSeconds ?? 60));
      throw new BootsealError("RATE_LIMITED", "too many failed authentications from this address");
    }
    throw err;
  }

  async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<Principal> {
    const header = request.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer +(\S+) *$/i.exec(header);
      if (!m)
        return fail(request, reply, new BootsealError("UNAUTHORIZED", "malformed Authorization header"));
      const token = m[1] as string;
      if (looksLikeBootstrapToken(token)) {
        const machine = parseBootstrapToken(token);
        if (!machine)
          return fail(request, reply, new BootsealError("UNAUTHORIZED", "malformed bootstrap token"));
        return { kind: "machine", machine, token };
      }
      const controller = findController(options.controllers, token);
      if (!controller) return fail(request, reply, new BootsealError("UNAUTHORIZED", "unknown bearer token"));
      return { kind: "controller", name: controller.name, scopes: controller.scopes };
    }
    if (options.mutualTls) {
      const controller = certificateController(request, options.controllers);
      if (controller) return { kind: "controller", name: controller.name, scopes: controller.scopes };
    }
    return fail(
      request,
      reply,
      new BootsealError("UNAUTHORIZED", "missing credentials: send Authorization: Bearer <token>"),
    );
  }

  app.addHook("onRequest", async (request, reply) => {
    const auth = request.routeOptions.config?.auth;
    if (!auth) return;
    const peek = await limiter(request, { increment: false });
    if (!peek.isAllowed && peek.remaining === 0 && (peek.ttlInSeconds ?? 0) > 0) {
      void reply.header("retry-after", String(peek.ttlInSeconds));
      throw new BootsealError("RATE_LIMITED", "too many failed authentications from this address");
    }
    const principal = await authenticate(request, reply);
    stateOf(request).principal = principal;
    if (principal.kind === "machine") {
      if (!auth.machine) throw new BootsealError("FORBIDDEN", "a bootstrap token cannot call this route");
      const target = routeMachine(request);
      if (
        !target ||
        target.namespace !== principal.machine.namespace ||
        target.name !== principal.machine.name
      ) {
        throw new BootsealError("FORBIDDEN", "this bootstrap token belongs to another machine");
      }
      return;
    }
    if (auth.controller === false)
      throw new BootsealError("FORBIDDEN", "only the machine itself can call this route");
    if (auth.scope && !principal.scopes.includes(auth.scope) && !principal.scopes.includes("admin")) {
      throw new BootsealError("FORBIDDEN", `controller ${principal.name} lacks the ${auth.scope} scope`);
    }
  });

  return {
    fail,
    async checkMachine(request, reply, now) {
      const principal = stateOf(request).principal;
      if (principal?.kind !== "machine") throw new BootsealError("INTERNAL", "no machine principal");
      const record = await options.machines.readToken(principal.machine, { signal: signalFor(reply) });
      try {
        return checkToken(record, principal.token, principal.machine, now);
      } catch (err) {
        if (err instanceof BootsealError && AUTH_FAILURE_CODES.has(err.code))
          return fail(request, reply, err);
        throw err;
      }
    },
  };
}

/**
 * Aborted when the client goes away before its response was sent, so reads and key-service
 * calls stop with it. Writes are not given it: a half-made publish is worse than a finished one.
 */
export function signalFor(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
