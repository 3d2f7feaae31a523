/**
 * `bootseal fetch --auth aws-iam|gcp|azure|tpm`: one login per boot at the machine's login route
 * (`…/v1/machines/<ns>/<name>/login`, next to its config URL) with a credential from the
 * method's provider; the answer is a bootstrap token for this boot, which the fetch and the
 * status reports then use exactly as a token from --token-file. Retried as the download is
 * (5xx, 429, no answer; a fresh credential each attempt); a refused credential (401) or an
 * identity not bound to the machine (403) is final; tpm first asks for a challenge
 * (`…/login/challenge`) that its credential answers (tpm.ts). The credential and the token never reach
 * a log line or a message.
 */
import { BootsealError } from "../../errors.ts";
import { sendOk } from "../../http/client.ts";
import type { CloudAuthMethod, LoginResponse, TpmChallengeResponse } from "../../machine/identity-login.ts";
import { type RetryOptions, withRetry } from "../../retry.ts";
import type { Source } from "../source.ts";
import { identityProvider, type ProviderSettings } from "./index.ts";

export interface LoginSettings extends ProviderSettings {
  readonly method: CloudAuthMethod;
  /** The service's identity (--server-id); default: the origin of the service URL. */
  readonly serverId?: string;
}

export interface LoginCall {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly ca?: string | Buffer | undefined;
  readonly retry: Omit<RetryOptions, "what">;
}

/** The login route next to a service config URL. */
export function loginUrlFor(configUrl: URL): URL {
  const url = new URL(configUrl.href);
  url.pathname = url.pathname.replace(/\/config$/, "/login");
  return url;
}

/** The bootstrap token for this boot, from a login at the service `source` (`--from`). */
export async function loginForToken(
  settings: LoginSettings,
  source: Source,
  call: LoginCall,
): Promise<string> {
  if (source.kind !== "service") {
    throw new BootsealError(
      "USAGE",
      `--auth ${settings.method} logs in at the service: --from must be its URL`,
    );
  }
  const provider = identityProvider(settings.method, settings);
  const audience = settings.serverId || source.url.origin;
  const url = loginUrlFor(source.url);
  const { value } = await withRetry(
    async ({ signal }) => {
      const challenge = async (request: unknown): Promise<TpmChallengeResponse> => {
        const res = await sendOk({
          method: "POST",
          url: new URL(`${url.pathname}/challenge`, url),
          headers: { "content-type": "application/json", accept: "application/json" },
          body: Buffer.from(JSON.stringify(request)),
          signal,
          ...(call.ca ? { ca: call.ca } : {}),
        });
        return JSON.parse(Buffer.from(res.body).toString("utf8")) as TpmChallengeResponse;
      };
      const credential = await provider.credential({ audience, env: call.env, signal, challenge });
      return sendOk({
        method: "POST",
        url,
        headers: { "content-type": "application/json", accept: "application/json" },
        body: Buffer.from(JSON.stringify({ method: settings.method, credential })),
        signal,
        ...(call.ca ? { ca: call.ca } : {}),
      });
    },
    { ...call.retry, what: `POST ${url.origin}${url.pathname} (${settings.method} login)` },
  );
  let answer: Partial<LoginResponse>;
  try {
    answer = JSON.parse(Buffer.from(value.body).toString("utf8")) as Partial<LoginResponse>;
  } catch {
    answer = {};
  }
  // A bootstrap token's shape (`bst.<ns>.<name>.<secret>`, src/service/tokens.ts).
  if (typeof answer.token !== "string" || !/^bst\.\S+$/.test(answer.token)) {
    throw new BootsealError(
      "SERVICE_UNAVAILABLE",
      `${url.origin}${url.pathname}: the login answer has no token`,
    );
  }
  return answer.token;
}
