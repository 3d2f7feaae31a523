/**
 * What the plugins learn about a request and hand to each other (auth -> handlers -> audit):
 * who is calling, and the error code the response carried. Decorated onto the request with
 * a null start value (Fastify's decorator rule: never a shared reference).
 */
import type { FastifyRequest } from "fastify";
import type { Scope } from "../config/service-config.ts";
import type { MachineRef } from "./names.ts";

export type Principal =
  | { readonly kind: "controller"; readonly name: string; readonly scopes: readonly Scope[] }
  /** The token is kept to check against the store; it is never logged or returned. */
  | { readonly kind: "machine"; readonly machine: MachineRef; readonly token: string };

export interface RequestState {
  principal: Principal | null;
  errorCode: string | null;
}

declare module "fastify" {
  interface FastifyRequest {
    bootsealState: RequestState | null;
  }
  interface FastifyContextConfig {
    /** Who may call the route; undefined: anyone. */
    auth?: { readonly scope?: Scope; readonly machine?: boolean; readonly controller?: boolean };
    /** The audit action recorded for every call of the route. */
    audit?: string;
  }
}

export function stateOf(request: FastifyRequest): RequestState {
  request.bootsealState ??= { principal: null, errorCode: null };
  return request.bootsealState;
}

export function who(principal: Principal | null): string {
  if (!principal) return "anonymous";
  return principal.kind === "controller"
    ? principal.name
    : `machine:${principal.machine.namespace}/${principal.machine.name}`;
}
