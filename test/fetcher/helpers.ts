/**
 * Shared by the fetcher tests: age keys, documents made with `bootseal encrypt`, each fetch
 * run as its own process (the real entry point, or the single executable), a temporary
 * root, and a status server that records what a machine reports.
 */

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { runBootsealInProcess } from "../helpers/cli-in-process.ts";

export const REPO = fileURLToPath(new URL("../../", import.meta.url));
export const CLI = join(REPO, "src/cli/main.ts");

export async function tempDir(prefix: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `bootseal-${prefix}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

export interface AgeKey {
  readonly identity: string;
  readonly recipient: string;
  /** A 0600 key file for SOPS_AGE_KEY_FILE. */
  readonly file: string;
}

export async function ageKey(dir: string, name: string): Promise<AgeKey> {
  const identity = await generateX25519Identity();
  const recipient = await identityToRecipient(identity);
  const file = join(dir, `${name}.agekey`);
  await writeFile(file, `${identity}\n`, { mode: 0o600 });
  return { identity, recipient, file };
}

/** `bootseal encrypt` in-process; returns the document. */
export async function encrypt(
  plaintext: string | Uint8Array,
  args: readonly string[],
  env: Record<string, string | undefined> = {},
): Promise<Uint8Array> {
  const input = typeof plaintext === "string" ? Buffer.from(plaintext) : plaintext;
  const r = await runBootsealInProcess(["encrypt", ...args], { env, cwd: REPO, input });
  if (r.status !== 0) throw new Error(`encrypt failed (${r.status}): ${r.stderr}`);
  return new Uint8Array(r.stdout);
}

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly ms: number;
}

/** Runs one process to its end: `node src/cli/main.ts ARGS` by default, or `command`. */
export function run(
  args: readonly string[],
  env: Record<string, string | undefined>,
  command?: string,
  timeoutMs = 60_000,
  /** Calls `onMatch` once, as soon as the child's stderr matches `pattern` (e.g. "retrying"). */
  watch?: { readonly pattern: RegExp; readonly onMatch: () => void },
): Promise<RunResult> {
  const t0 = performance.now();
  const file = command ?? process.execPath;
  const argv = command ? [...args] : [CLI, ...args];
  return new Promise((resolve, reject) => {
    const child = spawn(file, argv, { env: env as NodeJS.ProcessEnv, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (c) => {
      stdout += c;
    });
    let watching = watch;
    child.stderr.on("data", (c) => {
      stderr += c;
      if (watching?.pattern.test(stderr)) {
        watching.onMatch();
        watching = undefined;
      }
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: performance.now() - t0 });
    });
  });
}

/** A minimal environment for a machine: no ambient keys from the test runner. */
export function machineEnv(
  extra: Record<string, string | undefined> = {},
): Record<string, string | undefined> {
  return {
    PATH: process.env.PATH,
    HOME: "/nonexistent",
    XDG_CONFIG_HOME: "/nonexistent",
    ...extra,
  };
}

export interface StatusServer {
  readonly url: string;
  readonly posts: Array<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Records POSTed status bodies; answers 200. */
export async function statusServer(): Promise<StatusServer> {
  const posts: Array<Record<string, unknown>> = [];
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      posts.push(JSON.parse(body || "{}") as Record<string, unknown>);
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/v1/machines/default/m1/status`,
    posts,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export const MANIFEST = [
  "path: /etc/kubernetes/bootstrap-kubelet.conf",
  "content: |",
  "  apiVersion: v1",
  "  kind: Config",
  "mode: 0640",
  "owner: '0'",
  "group: '0'",
  "---",
  "path: /etc/kubernetes/pki/ca.crt",
  "content: Q0EgYnl0ZXMK",
  "encoding: base64",
  "mode: 0644",
  "---",
  "path: /var/lib/kubelet/token",
  "content: s3cr3t-join-token",
  "",
].join("\n");

/** The three files of MANIFEST, with their bytes and modes, under `root`. */
export async function assertManifestWritten(root: string): Promise<void> {
  const mode = async (p: string) => (await stat(join(root, p))).mode & 0o777;
  assert.equal(
    await readFile(join(root, "etc/kubernetes/bootstrap-kubelet.conf"), "utf8"),
    "apiVersion: v1\nkind: Config\n",
  );
  assert.equal(await readFile(join(root, "etc/kubernetes/pki/ca.crt"), "utf8"), "CA bytes\n");
  assert.equal(await readFile(join(root, "var/lib/kubelet/token"), "utf8"), "s3cr3t-join-token");
  assert.equal(await mode("etc/kubernetes/bootstrap-kubelet.conf"), 0o640);
  assert.equal(await mode("etc/kubernetes/pki/ca.crt"), 0o644);
  assert.equal(await mode("var/lib/kubelet/token"), 0o600);
}
