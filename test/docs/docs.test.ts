/**
 * The README and docs/*.md as tests: every shell block a user is told to type (test/docs/doc-blocks.ts
 * says which blocks and how they are marked) runs as typed, in order, one bash session per page,
 * in a fresh copy of this checkout (its tracked and untracked files, as a clone of it would hold).
 *
 * - README.md starts from nothing: its own `npm ci && npm start` installs, builds, makes the
 *   executables and serves; the page's path ends in a machine that fetched, ran its command and
 *   reported `succeeded`. The other pages that talk to the service get a fresh `npm start` (a new
 *   ./data) unless they start the service themselves.
 * - Those sessions run in a network namespace of their own (`unshare -rn`, loopback up), so the
 *   service has its default address 127.0.0.1:7480 and another checkout's suite on this machine
 *   cannot collide with it. The namespace has no route to the npm registry: npm runs with
 *   `npm_config_offline=true` on the cache the suite's own `npm ci` filled.
 * - Pages that need a peer (a Kubernetes API server, OpenBao) run outside the namespace against
 *   it, with the peer's address where the page has a placeholder.
 * - A user's PATH: the machine's own tools; `bootseal` where a global install links it (the
 *   package's bin through its #! line, with the pinned Node 24 as `node`), except for the README,
 *   whose quickstart runs on the machine's own Node as a newcomer's does.
 * - Placeholders: only what a reader replaces (the service's URL, a file the page says they have).
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { REPO } from "../fetcher/helpers.ts";
import { type DocBlock, docBlocks } from "./doc-blocks.ts";

const SERVICE = "http://127.0.0.1:7480";
const root = mkdtempSync(join(tmpdir(), "bootseal-docs-"));
const copy = join(root, "p");
const userBin = join(root, "bin");
after(() => rmSync(root, { recursive: true, force: true }));

/** The page files a user reads: README.md and docs/*.md. */
const PAGES = [
  "README.md",
  ...readdirSync(join(REPO, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
];

function blocksOf(page: string): DocBlock[] {
  return docBlocks(page, readFileSync(join(REPO, page), "utf8"));
}

before(() => {
  // What a clone of this checkout holds: tracked files and untracked ones git does not ignore.
  const files = execFileSync("git", ["ls-files", "-z", "-co", "--exclude-standard"], {
    cwd: REPO,
    encoding: "utf8",
  })
    .split("\0")
    .filter((f) => f !== "" && !f.startsWith("node_modules"));
  for (const f of files) {
    mkdirSync(dirname(join(copy, f)), { recursive: true });
    cpSync(join(REPO, f), join(copy, f), { verbatimSymlinks: true });
  }
  mkdirSync(userBin);
  // A global install links the bin; Node 24 is the `node` its #! line finds.
  symlinkSync(join(copy, "dist/cli/main.js"), join(userBin, "bootseal"));
  symlinkSync(process.execPath, join(userBin, "node"));
});

interface Session {
  readonly page: string;
  /** Run in a private network namespace with the service on its default address. */
  readonly netns: boolean;
  /** Start `npm start` (fresh ./data) before the page's blocks, for pages that use a running service. */
  readonly npmStart?: boolean;
  /** The global install's bin (with Node 24) first on PATH. */
  readonly installed: boolean;
  /** A reader's placeholders → this run's values. */
  readonly placeholders?: Readonly<Record<string, string>>;
  /** What the reader already has at hand (shell, run before the first block). */
  readonly setup?: string;
  readonly env?: Readonly<Record<string, string>>;
}

interface SessionResult {
  readonly status: number | null;
  readonly output: string;
  readonly ran: readonly DocBlock[];
}

const shellQuote = (s: string) => `'${s.replaceAll("'", "'\\''")}'`;

/** The bash script of one page: its blocks in order, a marker line before each, background blocks in their own process group. */
function sessionScript(session: Session, blocks: readonly DocBlock[], work: string): string {
  const waitForService = (what: string) =>
    `for i in $(seq 1 1200); do curl -fsS -o /dev/null ${SERVICE}/healthz 2>/dev/null && break; ` +
    `kill -0 "\${bg[-1]}" 2>/dev/null || { echo "doc-test: ${what} exited before the service answered" >&2; exit 97; }; ` +
    `sleep 0.25; done; curl -fsS -o /dev/null ${SERVICE}/healthz`;
  const lines = [
    "set -eo pipefail",
    "bg=()",
    `stop() { for p in "\${bg[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }`,
    "trap stop EXIT",
    `cd ${shellQuote(copy)}`,
  ];
  if (session.netns) lines.push("ip link set lo up", "rm -rf data");
  if (session.setup) lines.push(session.setup);
  if (session.npmStart) {
    lines.push(
      `setsid npm start > ${shellQuote(join(work, "npm-start.log"))} 2>&1 & bg+=($!)`,
      waitForService("npm start"),
    );
  }
  blocks.forEach((block, i) => {
    let code = block.code;
    for (const [from, to] of Object.entries(session.placeholders ?? {})) code = code.replaceAll(from, to);
    lines.push(`echo "::doc-test ${block.file}:${block.line}" >&2`);
    if (block.role.kind === "background") {
      const file = join(work, `block-${i}.sh`);
      writeFileSync(file, code);
      lines.push(
        `setsid bash ${shellQuote(file)} > ${shellQuote(join(work, `block-${i}.log`))} 2>&1 & bg+=($!)`,
        waitForService(`${block.file}:${block.line}`),
      );
    } else {
      lines.push(code);
    }
  });
  lines.push('echo "::doc-test done" >&2');
  return `${lines.join("\n")}\n`;
}

function runSession(session: Session): Promise<SessionResult> {
  const blocks = blocksOf(session.page);
  const work = mkdtempSync(join(root, "session-"));
  for (const b of blocks) {
    if (b.role.kind === "file") writeFileSync(join(copy, b.role.name), b.code);
  }
  const ran = blocks.filter((b) => b.role.kind === "run" || b.role.kind === "background");
  const script = join(work, "session.sh");
  writeFileSync(script, sessionScript(session, ran, work));
  const path = session.installed ? `${userBin}:${process.env.PATH}` : process.env.PATH;
  const env = {
    PATH: path,
    HOME: process.env.HOME ?? root,
    npm_config_offline: session.netns ? "true" : "false",
    npm_config_update_notifier: "false",
    ...session.env,
  };
  const [cmd, args] = session.netns ? ["unshare", ["-rn", "bash", script]] : ["bash", [script]];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args as string[], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (c: Buffer) => (output += c.toString()));
    child.stderr.on("data", (c: Buffer) => (output += c.toString()));
    child.on("error", reject);
    child.on("close", (status) => resolve({ status, output, ran }));
  });
}

/** Fails with the block that failed (the last marker) and the session's output. */
function assertSessionPassed(r: SessionResult): void {
  const markers = [...r.output.matchAll(/^::doc-test (\S+)$/gm)].map((m) => m[1]);
  const last = markers.at(-1);
  assert.equal(
    r.status === 0 && last === "done",
    true,
    `the block at ${last ?? "(before the first block)"} failed (exit ${r.status}):\n${r.output.slice(-6000)}`,
  );
  assert.equal(markers.length, r.ran.length + 1, "every block ran");
}

test("every doc-test marker belongs to a block, and every block left out says why", () => {
  let shell = 0;
  for (const page of PAGES) {
    const text = readFileSync(join(REPO, page), "utf8");
    const blocks = blocksOf(page);
    const marked = blocks.filter((b) => b.role.kind !== "run").length;
    assert.equal(
      (text.match(/<!-- doc-test:/g) ?? []).length,
      marked,
      `${page}: a marker not right before a block`,
    );
    for (const b of blocks)
      if (b.role.kind === "not-run") assert.ok(b.role.reason.length > 10, `${b.file}:${b.line}`);
    shell += blocks.filter((b) => b.role.kind !== "file").length;
  }
  assert.ok(shell > 10, `the pages' shell blocks were found (${shell})`);
});

test("README: npm ci && npm start, publish, a machine fetches, runs its command and reports succeeded", {
  timeout: 900_000,
}, async () => {
  const r = await runSession({ page: "README.md", netns: true, installed: false });
  assertSessionPassed(r);
  assert.match(r.output, /succeeded/);
  assert.match(r.output, /joined with 32 bytes of config/);
  assert.equal(
    readFileSync(join(copy, "worker-0/etc/kubernetes/join.conf"), "utf8"),
    "a secret only worker-0 can read\n",
  );
});
