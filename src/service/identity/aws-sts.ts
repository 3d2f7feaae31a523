/**
 * The service's one call to AWS STS: a machine's signed `GetCallerIdentity`, replayed as it
 * was signed to the configured endpoint, and the answer read. node:http(s) rather than an
 * SDK client: the request is already signed, and the SDK would sign it again. The answer is
 * held to 64 KiB, redirects are not followed, each attempt has a timeout, and only an
 * unavailable STS (5xx, no answer) is tried again: a 4xx is STS refusing the signature.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { BootsealError } from "../../errors.ts";
import { type BackoffPolicy, withRetry } from "../../retry.ts";

/** Largest STS answer read; a GetCallerIdentity answer is well under 1 KiB. */
export const STS_ANSWER_MAX_BYTES = 64 * 1024;

export interface StsCall {
  readonly endpoint: URL;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly signal?: AbortSignal;
  readonly attemptTimeoutMs?: number;
  readonly maxAttempts?: number;
  readonly backoff?: BackoffPolicy;
}

export interface CallerIdentity {
  readonly arn: string;
  readonly account: string;
  readonly userId: string;
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

function unavailable(why: string, cause?: unknown): BootsealError {
  return new BootsealError("KEY_UNAVAILABLE", `AWS STS is unavailable (${why})`, { cause });
}

function postOnce(call: StsCall, signal: AbortSignal): Promise<Answer> {
  const isHttps = call.endpoint.protocol === "https:";
  const body = Buffer.from(call.body, "utf8");
  const headers = { ...call.headers, "content-length": String(body.byteLength) };
  return new Promise<Answer>((resolve, reject) => {
    const onResponse = (res: IncomingMessage): void => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (chunk: Buffer) => {
        size += chunk.length;
        if (size > STS_ANSWER_MAX_BYTES) {
          res.destroy();
          reject(unavailable(`an answer larger than ${STS_ANSWER_MAX_BYTES} bytes`));
          return;
        }
        chunks.push(chunk);
      });
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", (err) => reject(unavailable("the answer broke off", err)));
    };
    const options = { method: "POST", headers, signal };
    const req = isHttps
      ? httpsRequest(call.endpoint, options, onResponse)
      : httpRequest(call.endpoint, options, onResponse);
    req.on("error", (err) => {
      const code = (err as NodeJS.ErrnoException).code ?? err.name;
      reject(unavailable(`no answer: ${code}`, err));
    });
    req.end(body);
  });
}

/** The `<Code>` of an STS error answer, when it has a plausible one (for the message). */
function errorCode(xml: string): string | undefined {
  const code = /<Code>([A-Za-z.]{1,64})<\/Code>/.exec(xml)?.[1];
  return code;
}

/**
 * Replays the signed request and reads the caller's identity. UNAUTHORIZED when STS refuses
 * it (a 4xx: bad or expired signature, unknown key) or answers something that is not a
 * GetCallerIdentity result; KEY_UNAVAILABLE when STS cannot be reached or keeps failing.
 */
export async function getCallerIdentity(call: StsCall): Promise<CallerIdentity> {
  const { value } = await withRetry(
    async ({ signal }) => {
      const answer = await postOnce(call, signal);
      if (answer.status >= 500 || answer.status === 0) throw unavailable(`HTTP ${answer.status}`);
      return answer;
    },
    {
      what: `POST ${call.endpoint.origin}`,
      maxAttempts: call.maxAttempts ?? 3,
      attemptTimeoutMs: call.attemptTimeoutMs ?? 10_000,
      timeoutCode: "KEY_UNAVAILABLE",
      backoff: call.backoff ?? { baseMs: 200, capMs: 2000 },
      rethrowLast: true,
      ...(call.signal ? { signal: call.signal } : {}),
    },
  );
  if (value.status !== 200) {
    const code = errorCode(value.body);
    throw new BootsealError(
      "UNAUTHORIZED",
      `AWS STS refused the signed request (HTTP ${value.status}${code ? ` ${code}` : ""})`,
    );
  }
  return parseCallerIdentity(value.body);
}

const ENTITIES: Readonly<Record<string, string>> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

function decodeText(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-z]{2,4});/g, (whole, ref: string) => {
    if (ref.startsWith("#x")) return String.fromCodePoint(Number.parseInt(ref.slice(2), 16));
    if (ref.startsWith("#")) return String.fromCodePoint(Number.parseInt(ref.slice(1), 10));
    return ENTITIES[ref] ?? whole;
  });
}

/** The one element `name` directly holding text, exactly once in `xml`; else undefined. */
function onlyElement(xml: string, name: string): string | undefined {
  const all = [...xml.matchAll(new RegExp(`<${name}>([^<]*)</${name}>`, "g"))];
  if (all.length !== 1 || xml.split(`<${name}`).length !== 2) return undefined;
  return decodeText((all[0] as RegExpMatchArray)[1] as string).trim();
}

/**
 * A strict reading of STS's XML answer: the root is GetCallerIdentityResponse, its
 * GetCallerIdentityResult holds Arn, UserId and Account exactly once each, and the ARN's
 * account is the Account. Anything else is refused rather than guessed at.
 */
export function parseCallerIdentity(xml: string): CallerIdentity {
  const refuse = () =>
    new BootsealError("UNAUTHORIZED", "AWS STS answered something other than a GetCallerIdentity result");
  const root =
    /^\s*(?:<\?xml[^>]*\?>\s*)?<GetCallerIdentityResponse(?:\s[^>]*)?>([\s\S]*)<\/GetCallerIdentityResponse>\s*$/.exec(
      xml,
    );
  if (!root) throw refuse();
  const results = [
    ...(root[1] as string).matchAll(/<GetCallerIdentityResult>([\s\S]*?)<\/GetCallerIdentityResult>/g),
  ];
  if (results.length !== 1) throw refuse();
  const result = (results[0] as RegExpMatchArray)[1] as string;
  const arn = onlyElement(result, "Arn");
  const account = onlyElement(result, "Account");
  const userId = onlyElement(result, "UserId");
  if (arn === undefined || account === undefined || userId === undefined) throw refuse();
  if (!/^\d{12}$/.test(account) || userId === "") throw refuse();
  const m = /^arn:aws[a-z-]*:(?:iam|sts)::(\d{12}):\S+$/.exec(arn);
  if (!m || m[1] !== account) throw refuse();
  return { arn, account, userId };
}
