/**
 * What the plugins learn about a request and hand to each other (auth -> handlers -> audit):
 * who is calling, the machine's checked token record, and the error code the response
 * carried. Decorated onto the request with a null start value (Fastify's decorator rule:
 * never a shared reference).
 */
import type { FastifyRequest } from "fastify";
import type { Scope } from "../config/service-config.ts";
import { BootsealError } from "../errors.ts";
import type { MachineId } from "../machine/machine-id.ts";
import type { Policies } from "./controllers/policies.ts";
import type { Versioned } from "./records.ts";
import type { StatusRecord } from "./status-record.ts";
import type { TokenRecord } from "./tokens.ts";

export type Principal =
  | { readonly kind: "controller"; readonly name: string; readonly policies: Policies }
  /** The token is kept to check against the store; it is never logged or returned. */
  | { readonly kind: "machine"; readonly machine: MachineId; readonly token: string };

export interface RequestState {
  principal: Principal | null;
  /** A machine principal's token record, once the auth plugin checked it against the store. */
  machineToken: TokenRecord | null;
  /** The token record version that check used (a fetch spends a use on it). */
  storedToken: Versioned<TokenRecord> | null;
  /** Routes confirmed by the status record: the version the check used. */
  storedStatus: Versioned<StatusRecord> | null;
  /** A machine login's proven cloud identity (`aws-iam:<arn>`), for the audit line. */
  identity: string | null;
  errorCode: string | null;
  /**
   * On a route that names no namespace (list, events): the namespaces in which the calling
   * controller holds the route's scopes. null: no limit (a namespace was named and checked).
   */
  namespaces: ((namespace: string) => boolean) | null;
  /** The matched route's config (routeConfigOf), read once. */
  route: RouteConfig | null;
}

/** A route's config as Fastify keeps it: ours, and the route pattern (`url`, undefined when unmatched). */
export type RouteConfig = Partial<FastifyRequest["routeOptions"]["config"]>;

/**
 * Who may call a route (read by the auth plugin's onRoute hook; undefined: anyone).
 * - `scopes`: a controller needs every one of these (`admin` implies them all); absent, no
 *   controller may call the route.
 * - `machine: "params"`: the machine named by the route's `:ns/:name` may call it with its
 *   bootstrap token, checked against the store (hash, expiry) before the handler runs.
 * - `confirmedBy`: the handler ends in a conditional write of this record that re-checks the
 *   token before anything is answered, so the check may start from this replica's last seen
 *   version of it (machine-store cachedToken / cachedStatus); the record checked is left on
 *   the request state for that write. `status-record` checks the token against the status
 *   record's mirror of it. Without it, the token record is read from the store.
 */
export interface RouteAuth {
  readonly scopes?: readonly Scope[];
  readonly machine?: "params";
  readonly confirmedBy?: "token-record" | "status-record";
}

declare module "fastify" {
  interface FastifyRequest {
    bootsealState: RequestState | null;
  }
  interface FastifyContextConfig {
    auth?: RouteAuth;
    /** The audit action recorded for every call of the route. */
    audit?: string;
  }
}

export function stateOf(request: FastifyRequest): RequestState {
  request.bootsealState ??= {
    principal: null,
    machineToken: null,
    storedToken: null,
    storedStatus: null,
    identity: null,
    errorCode: null,
    namespaces: null,
    route: null,
  };
  return request.bootsealState;
}

/**
 * The matched route's config, with its pattern (`url`). Fastify's `request.routeOptions`
 * builds a new object of thirteen fields on every read, and the edge, audit, access-log and
 * metrics hooks each want it for every request: read once per request here.
 */
export function routeConfigOf(request: FastifyRequest): RouteConfig {
  const state = stateOf(request);
  const route = state.route ?? request.routeOptions.config ?? {};
  state.route = route;
  return route;
}

export function who(principal: Principal | null): string {
  if (!principal) return "anonymous";
  return principal.kind === "controller"
    ? principal.name
    : `machine:${principal.machine.namespace}/${principal.machine.name}`;
}

/** The machine's checked token when a machine is calling; null for a controller. */
export function machineTokenOf(request: FastifyRequest): TokenRecord | null {
  const state = stateOf(request);
  if (state.principal?.kind !== "machine") return null;
  if (!state.machineToken) throw new BootsealError("INTERNAL", "a machine route ran without its token check");
  return state.machineToken;
}

/** Whether the caller of a list route may see machines of `namespace` (its policies). */
export function mayList(request: FastifyRequest, namespace: string): boolean {
  const test = stateOf(request).namespaces;
  return test === null || test(namespace);
}

/** Whether the calling controller may be handed a machine token for `namespace` (tokens:mint). */
export function mayMintTokens(request: FastifyRequest, namespace: string): boolean {
  const principal = stateOf(request).principal;
  return principal?.kind === "controller" && principal.policies.allows("tokens:mint", namespace);
}
