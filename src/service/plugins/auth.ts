/**
 * Authentication and authorisation, attached by an onRoute hook to every route that declares
 * `config.auth` (request-state.ts RouteAuth), as @fastify/rate-limit attaches its per-route
 * checks: handlers never call it, and unauthenticated bodies are never parsed.
 *
 * - Controllers: `Authorization: Bearer <token>`, compared by SHA-256 with
 *   crypto.timingSafeEqual against every configured hash; or, with `tls.clientCa`, a verified
 *   client certificate whose subject CN is a controller's name. Each route names the scopes
 *   it needs; `admin` implies every scope. Missing scope: 403 FORBIDDEN.
 * - Machines: a bootstrap token `bst.<ns>.<name>.<secret>` (tokens.ts), on routes with
 *   `machine: "params"`. A token naming another machine is refused onRequest (403) without a
 *   store read; the hash and expiry are checked against the store in a preHandler, after the
 *   params and body were validated, and the record is left on the request state for the
 *   handler (which spends a use where the route does).
 * - Failed authentications are counted per source address with @fastify/rate-limit, those
 *   a machine route's handler finds too (a token revoked or used up meanwhile); past
 *   `rateLimit.authFailuresPerMinute` every authenticated route answers 429 with Retry-After
 *   for that address until the minute is over.
 */
import type { TLSSocket } from "node:tls";
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import type { ControllerConfig } from "../../config/service-config.ts";
import { BootsealError } from "../../errors.ts";
import { type MachineId, sameMachine } from "../../machine/machine-id.ts";
import type { MachineStore } from "../machine-store.ts";
import { checkToken } from "../machine-store.ts";
import { type Principal, type RouteAuth, stateOf } from "../request-state.ts";
import { digestsEqual, looksLikeBootstrapToken, parseBootstrapToken, sha256Hex } from "../tokens.ts";

type Limiter = (
  request: FastifyRequest,
  options?: { increment?: boolean },
) => Promise<{ isAllowed: boolean; remaining?: number; ttlInSeconds?: number; isExceeded?: boolean }>;

export interface AuthOptions {
  readonly controllers: readonly ControllerConfig[];
  readonly mutualTls: boolean;
  readonly authFailuresPerMinute: number;
  readonly machines: MachineStore;
  readonly now: () => Date;
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

function routeMachine(request: FastifyRequest): MachineId | null {
  const p = request.params as { ns?: string; name?: string } | undefined;
  return p?.ns && p.name ? { namespace: p.ns, name: p.name } : null;
}

function isAuthFailure(err: unknown): err is BootsealError {
  return err instanceof BootsealError && AUTH_FAILURE_CODES.has(err.code);
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** A route's hooks of one kind, with ours last (after the route's own, as declared). */
function withHook(existing: unknown, hook: Hook): Hook[] {
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  return [...(list as Hook[]), hook];
}

export function authPlugin(app: FastifyInstance, options: AuthOptions): void {
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

  /** onRequest: who is calling, and may they call this route at all (no store access). */
  async function authorize(auth: RouteAuth, request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const peek = await limiter(request, { increment: false });
    if (!peek.isAllowed && peek.remaining === 0 && (peek.ttlInSeconds ?? 0) > 0) {
      void reply.header("retry-after", String(peek.ttlInSeconds));
      throw new BootsealError("RATE_LIMITED", "too many failed authentications from this address");
    }
    const principal = await authenticate(request, reply);
    stateOf(request).principal = principal;
    if (principal.kind === "machine") {
      if (auth.machine !== "params")
        throw new BootsealError("FORBIDDEN", "a bootstrap token cannot call this route");
      const target = routeMachine(request);
      if (!target || !sameMachine(target, principal.machine)) {
        throw new BootsealError("FORBIDDEN", "this bootstrap token belongs to another machine");
      }
      return;
    }
    if (auth.scopes === undefined)
      throw new BootsealError("FORBIDDEN", "only the machine itself can call this route");
    const missing = principal.scopes.includes("admin")
      ? undefined
      : auth.scopes.find((scope) => !principal.scopes.includes(scope));
    if (missing)
      throw new BootsealError("FORBIDDEN", `controller ${principal.name} lacks the ${missing} scope`);
  }

  /** preHandler: a machine's token against its stored record (hash, machine, expiry). */
  async function checkMachineToken(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const state = stateOf(request);
    if (state.principal?.kind !== "machine") return;
    const { machine, token } = state.principal;
    const record = await options.machines.readToken(machine, { signal: signalFor(reply) });
    try {
      state.machineToken = checkToken(record, token, machine, options.now());
    } catch (err) {
      if (isAuthFailure(err)) return fail(request, reply, err);
      throw err;
    }
  }

  app.addHook("onRoute", (route: RouteOptions) => {
    const auth = route.config?.auth;
    if (!auth) return;
    route.onRequest = withHook(route.onRequest, (request, reply) => authorize(auth, request, reply));
    if (auth.machine !== "params") return;
    route.preHandler = withHook(route.preHandler, checkMachineToken);
    // A token can be revoked or used up between the check and the handler's use of it: those
    // failures count towards the same limit as the ones found above.
    const handler = route.handler;
    route.handler = async function (this: FastifyInstance, request, reply) {
      try {
        return await handler.call(this, request, reply);
      } catch (err) {
        if (stateOf(request).principal?.kind === "machine" && isAuthFailure(err)) {
          return fail(request, reply, err);
        }
        throw err;
      }
    };
  });
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
