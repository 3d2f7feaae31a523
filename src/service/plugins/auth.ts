/**
 * Authentication and authorisation, attached by an onRoute hook to every route that declares
 * `config.auth` (request-state.ts RouteAuth), as @fastify/rate-limit attaches its per-route
 * checks: handlers never call it, and unauthenticated bodies are never parsed.
 *
 * - Controllers: `Authorization: Bearer <token>`, compared by SHA-256 with
 *   crypto.timingSafeEqual against every configured hash; else, with
 *   `controllerAuth.kubernetes`, a JWT reviewed by the Kubernetes API server (TokenReview) and
 *   mapped through `kubernetesBindings`; or, with `tls.clientCa`, a verified client
 *   certificate whose subject CN is a controller's name (controllers/credentials.ts, swapped
 *   whole on a reload). Each route names the scopes it needs, checked in the namespace of the
 *   machine it names (or of its `?namespace=`); a route that names none (list, events) gets
 *   the namespaces the caller may see on the request state. `admin` implies every scope in
 *   its namespaces. Missing scope: 403 FORBIDDEN.
 * - Machines: a bootstrap token `bst.<ns>.<name>.<secret>` (tokens.ts), on routes with
 *   `machine: "params"`. A token naming another machine is refused onRequest (403) without a
 *   store read; the hash and expiry are checked against the store in a preHandler, after the
 *   params and body were validated, and the record is left on the request state for the
 *   handler (which spends a use where the route does).
 * - Failed authentications (those a machine route's handler finds too: a token revoked or
 *   used up meanwhile) are counted in fixed one-minute windows per presented credential
 *   (SHA-256 of the token), per machine a bootstrap token names, and per source address.
 *   Past `rateLimit.authFailuresPerMinute` in any of its buckets, a failing request is
 *   answered 429 with Retry-After instead of 401. A credential that verifies is never
 *   refused: limits only change how failures are answered, and the only request refused
 *   before any check is one that carries no usable credential at all (none, or a malformed
 *   header) from an address over its limit. So wrong tokens cost the one sending them, not
 *   the fleet behind the same NAT or load balancer.
 */
import type { TLSSocket } from "node:tls";
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from "fastify";
import type { ControllerConfig } from "../../config/service-config.ts";
import { BootsealError, type ErrorCode, hasCode } from "../../errors.ts";
import { type MachineId, sameMachine } from "../../machine/machine-id.ts";
import { SizeBoundedLru } from "../../size-bounded-lru.ts";
import { ControllerCredentials, type ControllerIdentity } from "../controllers/credentials.ts";
import type { MachineStore } from "../machine-store.ts";
import { type Principal, type RouteAuth, stateOf } from "../request-state.ts";
import {
  checkToken,
  DEFAULT_TOKEN_WORK,
  looksLikeBootstrapToken,
  parseBootstrapToken,
  type TokenRecord,
  type TokenWork,
  tokenFromMirror,
} from "../tokens.ts";

export interface AuthOptions {
  /** The live set (reloadable); a plain list is fixed (tests). */
  readonly controllers: ControllerCredentials | readonly ControllerConfig[];
  readonly mutualTls: boolean;
  /** Failures per bucket (credential, machine named, address) per minute before 429. */
  readonly authFailuresPerMinute: number;
  readonly machines: MachineStore;
  readonly now: () => Date;
  /** Most failure buckets kept at once (default FAILURE_BUCKETS_MAX). */
  readonly maxFailureBuckets?: number;
  /** The hashing and comparing of token checks (tests count it). */
  readonly tokenWork?: TokenWork;
}

/** The window failures are counted in. */
export const FAILURE_WINDOW_MS = 60_000;
/** Default bound on the failure buckets held in memory (each under 200 bytes). */
export const FAILURE_BUCKETS_MAX = 100_000;

/**
 * Fixed-window failure counters by key, in memory (per replica), bounded: the counters are
 * kept in least-recently-failed order, and past `maxKeys` the front goes (expired or not),
 * O(1) per failure. A flood of distinct credentials cannot grow it, and the bucket of an
 * address that keeps failing stays at the back.
 */
export class FailureCounter {
  readonly #windows: SizeBoundedLru<string, { count: number; resetAt: number }>;
  readonly #limit: number;
  readonly #now: () => number;

  constructor(limit: number, maxKeys: number, now: () => number) {
    this.#limit = limit;
    this.#windows = new SizeBoundedLru(Math.max(1, maxKeys), () => 1);
    this.#now = now;
  }

  /** The key's window while it lasts (an expired one is dropped); its recency unchanged. */
  #current(key: string, at: number) {
    const w = this.#windows.peek(key);
    if (w && w.resetAt <= at) {
      this.#windows.delete(key);
      return undefined;
    }
    return w;
  }

  /** Counts one failure; the seconds to wait when the key is now past its limit, else 0. */
  fail(key: string): number {
    const at = this.#now();
    const w = this.#current(key, at) ?? { count: 0, resetAt: at + FAILURE_WINDOW_MS };
    this.#windows.set(key, w); // to the back: most recently failed
    w.count++;
    return w.count > this.#limit ? Math.max(1, Math.ceil((w.resetAt - at) / 1000)) : 0;
  }

  /** The seconds to wait when the key is already past its limit, else 0 (counts nothing). */
  blocked(key: string): number {
    const at = this.#now();
    const w = this.#current(key, at);
    return w && w.count >= this.#limit ? Math.max(1, Math.ceil((w.resetAt - at) / 1000)) : 0;
  }

  get size(): number {
    return this.#windows.size.entries;
  }
}

/** What a failed request presented: the buckets its failure counts in. */
interface Presented {
  /** SHA-256 of the presented token, when there was one. */
  readonly credential?: string;
  /** The machine a bootstrap token names. */
  readonly machine?: MachineId;
}

const AUTH_FAILURE_CODES: readonly ErrorCode[] = ["UNAUTHORIZED", "TOKEN_EXPIRED", "TOKEN_EXHAUSTED"];

function certificateController(request: FastifyRequest, controllers: ControllerCredentials) {
  const socket = request.raw.socket as Partial<TLSSocket>;
  if (!socket.encrypted || !socket.authorized || typeof socket.getPeerCertificate !== "function")
    return undefined;
  const cn = socket.getPeerCertificate().subject?.CN;
  const name = Array.isArray(cn) ? cn[0] : cn;
  return name ? controllers.byCertificateName(name) : undefined;
}

function controllerPrincipal(c: ControllerIdentity): Principal {
  return { kind: "controller", name: c.name, policies: c.policies };
}

/** `?namespace=` of a route that names no machine; a repeated one is refused. */
function queryNamespace(request: FastifyRequest): string | undefined {
  const ns = (request.query as { namespace?: unknown } | undefined)?.namespace;
  if (ns === undefined || ns === "") return undefined;
  if (typeof ns !== "string") throw new BootsealError("BAD_INPUT", "namespace may be given once");
  return ns;
}

function routeMachine(request: FastifyRequest): MachineId | null {
  const p = request.params as { ns?: string; name?: string } | undefined;
  return p?.ns && p.name ? { namespace: p.ns, name: p.name } : null;
}

function isAuthFailure(err: unknown): err is BootsealError {
  return hasCode(err, ...AUTH_FAILURE_CODES);
}

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/** A route's hooks of one kind, with ours last (after the route's own, as declared). */
function withHook(existing: unknown, hook: Hook): Hook[] {
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing : [existing];
  return [...(list as Hook[]), hook];
}

export function authPlugin(app: FastifyInstance, options: AuthOptions): void {
  const work = options.tokenWork ?? DEFAULT_TOKEN_WORK;
  const controllers =
    options.controllers instanceof ControllerCredentials
      ? options.controllers
      : new ControllerCredentials({
          controllers: options.controllers,
          kubernetesBindings: [],
          controllerAuth: {},
        });
  const failures = new FailureCounter(
    options.authFailuresPerMinute,
    options.maxFailureBuckets ?? FAILURE_BUCKETS_MAX,
    () => options.now().getTime(),
  );
  const addressKey = (request: FastifyRequest) => `address:${request.ip}`;

  /**
   * Counts a failure in each of its buckets, and answers 429 when one of them is past its
   * limit, else the failure itself. Only ever called for a credential that did not verify.
   */
  async function fail(
    request: FastifyRequest,
    reply: FastifyReply,
    err: BootsealError,
    presented: Presented = presentedBy(request),
  ): Promise<never> {
    let wait = failures.fail(addressKey(request));
    if (presented.credential) wait = Math.max(wait, failures.fail(`credential:${presented.credential}`));
    if (presented.machine) {
      const id = `${presented.machine.namespace}/${presented.machine.name}`;
      wait = Math.max(wait, failures.fail(`machine:${id}`));
    }
    if (wait > 0) {
      void reply.header("retry-after", String(wait));
      throw new BootsealError("RATE_LIMITED", "too many failed authentications; retry later");
    }
    throw err;
  }

  /** The buckets of a machine principal's failure found after authenticate (store, handler). */
  function presentedBy(request: FastifyRequest): Presented {
    const principal = stateOf(request).principal;
    return principal?.kind === "machine"
      ? { credential: work.hash(principal.token), machine: principal.machine }
      : {};
  }

  async function authenticate(request: FastifyRequest, reply: FastifyReply): Promise<Principal> {
    const header = request.headers.authorization;
    if (header !== undefined) {
      const m = /^Bearer +(\S+) *$/i.exec(header);
      if (!m) {
        await refuseFlood(request, reply);
        return fail(request, reply, new BootsealError("UNAUTHORIZED", "malformed Authorization header"));
      }
      const token = m[1] as string;
      if (looksLikeBootstrapToken(token)) {
        const machine = parseBootstrapToken(token);
        if (!machine)
          return fail(request, reply, new BootsealError("UNAUTHORIZED", "malformed bootstrap token"), {
            credential: work.hash(token),
          });
        return { kind: "machine", machine, token };
      }
      const controller = controllers.byToken(token);
      if (controller) return controllerPrincipal(controller);
      if (controllers.reviews(token)) {
        try {
          return controllerPrincipal(await controllers.byServiceAccountToken(token));
        } catch (err) {
          if (!isAuthFailure(err)) throw err; // FORBIDDEN (no binding), KEY_UNAVAILABLE (503)
          return fail(request, reply, err, { credential: work.hash(token) });
        }
      }
      return fail(request, reply, new BootsealError("UNAUTHORIZED", "unknown bearer token"), {
        credential: work.hash(token),
      });
    }
    if (options.mutualTls) {
      const controller = certificateController(request, controllers);
      if (controller) return controllerPrincipal(controller);
    }
    await refuseFlood(request, reply);
    return fail(
      request,
      reply,
      new BootsealError("UNAUTHORIZED", "missing credentials: send Authorization: Bearer <token>"),
    );
  }

  /**
   * A request with no usable credential, from an address past its limit: 429 before any other
   * work. Nothing it could carry would verify, so no valid caller is ever refused here.
   */
  async function refuseFlood(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const wait = failures.blocked(addressKey(request));
    if (wait > 0) {
      void reply.header("retry-after", String(wait));
      throw new BootsealError("RATE_LIMITED", "too many failed authentications from this address");
    }
  }

  /** onRequest: who is calling, and may they call this route at all (no store access). */
  async function authorize(auth: RouteAuth, request: FastifyRequest, reply: FastifyReply): Promise<void> {
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
    const { policies, name } = principal;
    const namespace = routeMachine(request)?.namespace ?? queryNamespace(request);
    if (namespace === undefined) {
      const missing = policies.missingEverywhere(auth.scopes);
      if (missing) throw new BootsealError("FORBIDDEN", `controller ${name} lacks the ${missing} scope`);
      stateOf(request).namespaces = policies.namespaceFilter(auth.scopes);
      return;
    }
    const missing = policies.missing(auth.scopes, namespace);
    if (missing) {
      const where = policies.missingEverywhere([missing]) ? "" : ` in namespace ${JSON.stringify(namespace)}`;
      throw new BootsealError("FORBIDDEN", `controller ${name} lacks the ${missing} scope${where}`);
    }
  }

  /**
   * preHandler: a machine's token against its stored record (hash, machine, expiry), or
   * against the status record's mirror of it where the route says so (the status post's one
   * read; a record without a mirror, older than it, falls back to the token record). On a
   * route confirmed by a later conditional write the check may start from this replica's last
   * seen version; a refusal is only ever made on what the store holds.
   */
  async function checkMachineToken(
    auth: RouteAuth,
    request: FastifyRequest,
    reply: FastifyReply,
  ): Promise<void> {
    const state = stateOf(request);
    if (state.principal?.kind !== "machine") return;
    const { machine, token } = state.principal;
    const { machines } = options;
    let guessed = false;
    const check = async (mayGuess: boolean): Promise<TokenRecord> => {
      state.storedStatus = null;
      state.storedToken = null;
      if (auth.confirmedBy === "status-record") {
        const cached = mayGuess ? machines.cachedStatus(machine) : undefined;
        guessed = cached !== undefined;
        // The signal only for a read: a check on this replica's guess (most status posts) makes none.
        state.storedStatus = cached ?? (await machines.readStatus(machine, { signal: signalFor(reply) }));
        const mirror = state.storedStatus?.value.token;
        if (mirror !== undefined) {
          const record = mirror && tokenFromMirror(machine, mirror);
          return checkToken(record, token, machine, options.now(), work);
        }
      }
      const cached =
        mayGuess && auth.confirmedBy === "token-record" ? machines.cachedToken(machine) : undefined;
      guessed ||= cached !== undefined;
      state.storedToken = cached ?? (await machines.readToken(machine, { signal: signalFor(reply) }));
      return checkToken(state.storedToken?.value ?? null, token, machine, options.now(), work);
    };
    try {
      try {
        state.machineToken = await check(auth.confirmedBy !== undefined);
      } catch (err) {
        if (!guessed || !isAuthFailure(err)) throw err;
        state.machineToken = await check(false); // refused on a guess: decide on the store
      }
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
    route.preHandler = withHook(route.preHandler, (request, reply) =>
      checkMachineToken(auth, request, reply),
    );
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

/** One signal per response: the token check and the handler share it. */
const signals = new WeakMap<FastifyReply, AbortSignal>();

/**
 * Aborted when the client goes away before its response was sent, so reads and key-service
 * calls stop with it. Writes are not given it: a half-made publish is worse than a finished one.
 */
export function signalFor(reply: FastifyReply): AbortSignal {
  let signal = signals.get(reply);
  if (signal) return signal;
  const controller = new AbortController();
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  signal = controller.signal;
  signals.set(reply, signal);
  return signal;
}
