import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { REPO } from "../fetcher/helpers.ts";
import { runBootsealInProcess } from "../helpers/cli-in-process.ts";

export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Buffer;
  json<T = Record<string, unknown>>(): T;
}

/** One HTTP call; a refused or cut connection is status 0 (the service was not there). */
export async function call(
  url: string,
  init: { method?: string; token?: string; body?: string | Uint8Array; contentType?: string } = {},
): Promise<Answer> {
  const headers: Record<string, string> = {};
  if (init.token) headers.authorization = `Bearer ${init.token}`;
  if (init.contentType) headers["content-type"] = init.contentType;
  try {
    const res = await fetch(url, {
      method: init.method ?? "GET",
      headers,
      body: init.body,
      signal: AbortSignal.timeout(120_000),
    });
    const body = Buffer.from(await res.arrayBuffer());
    return { status: res.status, headers: res.headers, body, json: () => JSON.parse(body.toString()) };
  } catch {
    return { status: 0, headers: new Headers(), body: Buffer.alloc(0), json: () => ({}) as never };
  }
}

/** `bootseal decrypt FILE` in-process with the age key file; the plaintext, or throws. */
export async function decryptWithAge(dir: string, doc: Uint8Array, ageKeyFile: string): Promise<Buffer> {
  const file = join(dir, `doc-${Math.random().toString(36).slice(2)}.bin`);
  await writeFile(file, doc);
  const r = await runBootsealInProcess(["decrypt", file], {
    env: { SOPS_AGE_KEY_FILE: ageKeyFile },
    cwd: REPO,
  });
  if (r.status !== 0) throw new Error(`decrypt failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** A minimal service configuration; `extra` lines are appended. */
export function serviceConfig(opts: {
  store: string;
  recipient: string;
  tokenSha256: string;
  dataDir: string;
  audit: string;
  kms?: string;
  extra?: readonly string[];
  /** Fetches per bootstrap token (default 1000). */
  uses?: number;
  /** Default `off`: most fault tests read configs back after `succeeded`. */
  oneTimeFetch?: "off" | "after-success";
}): string {
  return [
    `store: ${opts.store}`,
    ...(opts.extra ?? []),
    "creation_rules:",
    "  - path_regex: .*",
    ...(opts.kms ? [`    kms: ${opts.kms}`] : []),
    `    age: ${opts.recipient}`,
    "controllers:",
    "  - name: faults",
    `    tokenSha256: ${opts.tokenSha256}`,
    "    scopes: [configs:write, tokens:mint, configs:read, status:read]",
    "bootstrapToken:",
    "  ttl: 1h",
    `  uses: ${opts.uses ?? 1000}`,
    // The fault tests read configs back after `succeeded`: the pre-#13 default keeps them.
    `oneTimeFetch: ${opts.oneTimeFetch ?? "off"}`,
    `dataDir: ${opts.dataDir}`,
    "audit:",
    `  path: ${opts.audit}`,
    "logLevel: warn",
    "",
  ].join("\n");
}
