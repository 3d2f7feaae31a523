/**
 * POST /v1/machines/:ns/:name/login: a machine with no bootstrap token proves its cloud
 * identity once per boot and gets one (../machines/login.ts). The route takes no bearer
 * token, so the auth plugin does not guard it; its failures (a credential that does not
 * verify, an identity not bound to the machine) are counted as failed token checks are, per
 * address, per machine named, per presented credential and per proven principal, with the
 * auth plugin's FailureCounter: past rateLimit.authFailuresPerMinute a failure is answered
 * 429 with Retry-After. The audit line names the principal, never the credential.
 * POST …/login/challenge is a tpm login's first step (../identity/tpm.ts), counted the same way.
 */
import type { FastifyInstance } from "fastify";
import type { MachineAuthConfig } from "../../config/machine-auth.ts";
import { BootsealError, type ErrorCode, hasCode } from "../../errors.ts";
import type { ServiceContext } from "../context.ts";
import { identityVerifiers, type VerifierOptions } from "../identity/index.ts";
import type { TpmVerifier } from "../identity/tpm.ts";
import { loginMachine } from "../machines/login.ts";
import { FAILURE_BUCKETS_MAX, FailureCounter, signalFor } from "../plugins/auth.ts";
import { stateOf } from "../request-state.ts";
import { LOGIN_BODY_LIMIT, loginSchema, tpmChallengeSchema } from "../schemas/login.ts";
import type { RequestTypeProvider } from "../schemas/type-provider.ts";
import { sha256Hex } from "../tokens.ts";

export interface LoginRouteOptions {
  readonly machineAuth: MachineAuthConfig;
  readonly authFailuresPerMinute: number;
  readonly verifiers?: VerifierOptions;
}

const COUNTED: readonly ErrorCode[] = ["UNAUTHORIZED", "FORBIDDEN"];

export function loginRoutes(parent: FastifyInstance, ctx: ServiceContext, options: LoginRouteOptions): void {
  const app = parent.withTypeProvider<RequestTypeProvider>();
  const login = {
    config: options.machineAuth,
    verifiers: identityVerifiers(options.machineAuth, options.verifiers),
  };
  const failures = new FailureCounter(options.authFailuresPerMinute, FAILURE_BUCKETS_MAX, () =>
    ctx.now().getTime(),
  );

  /** Counts a failed login or challenge; past the limit, the failure is answered 429. */
  const counted = (err: unknown, keys: string[], reply: { header(k: string, v: string): unknown }): never => {
    if (!hasCode(err, ...COUNTED)) throw err;
    const wait = Math.max(...keys.map((k) => failures.fail(k)));
    if (wait > 0) {
      void reply.header("retry-after", String(wait));
      throw new BootsealError("RATE_LIMITED", "too many failed logins; retry later");
    }
    throw err;
  };

  const tpm = login.verifiers.get("tpm") as TpmVerifier | undefined;
  app.post(
    "/v1/machines/:ns/:name/login/challenge",
    { schema: tpmChallengeSchema, bodyLimit: LOGIN_BODY_LIMIT, config: { audit: "login" } },
    async (request, reply) => {
      const m = { namespace: request.params.ns, name: request.params.name };
      const { audience, bindings } = options.machineAuth;
      if (audience === undefined || tpm === undefined || !bindings.some((b) => b.method === "tpm")) {
        throw new BootsealError("UNSUPPORTED", "tpm machine login is not configured on this service");
      }
      try {
        const answer = tpm.challenge(m, request.body, ctx.now());
        return reply.code(200).header("cache-control", "no-store").send(answer);
      } catch (err) {
        return counted(err, [`address:${request.ip}`, `machine:${m.namespace}/${m.name}`], reply);
      }
    },
  );

  app.post(
    "/v1/machines/:ns/:name/login",
    { schema: loginSchema, bodyLimit: LOGIN_BODY_LIMIT, config: { audit: "login" } },
    async (request, reply) => {
      const m = { namespace: request.params.ns, name: request.params.name };
      const state = stateOf(request);
      try {
        const answer = await loginMachine(ctx, login, m, request.body, {
          signal: signalFor(reply),
          identified: (principal) => {
            state.identity = `${request.body.method}:${principal}`;
          },
        });
        return reply.code(200).header("cache-control", "no-store").send(answer);
      } catch (err) {
        const keys = [
          `address:${request.ip}`,
          `machine:${m.namespace}/${m.name}`,
          `credential:${sha256Hex(request.body.credential)}`,
        ];
        if (state.identity) keys.push(`principal:${state.identity}`);
        return counted(err, keys, reply);
      }
    },
  );
}
