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
import { randomBytes } from "node:crypto";
import {
  cpSync,
  existsSync,
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
import { peer } from "../helpers/peers.ts";
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
  /** What the reader already has at hand (shell, run after `npm start` and before the first block). */
  readonly setup?: string;
  /** Run the blocks in a new, empty directory (a client project of the reader's), not the checkout. */
  readonly newProject?: boolean;
  /** Directories of the tools the page assumes installed (helm, promtool, …), put on PATH. */
  readonly tools?: readonly string[];
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
  if (session.npmStart) {
    lines.push(
      `setsid npm start > ${shellQuote(join(work, "npm-start.log"))} 2>&1 & bg+=($!)`,
      waitForService("npm start"),
    );
  }
  if (session.setup) lines.push(session.setup);
  if (session.newProject) lines.push(`mkdir project && cd project`);
  blocks.forEach((block, i) => {
    let code = block.code;
    for (const [from, to] of Object.entries(session.placeholders ?? {})) code = code.replaceAll(from, to);
    // On a line of its own even after output without a final newline.
    lines.push(`printf '\\n::doc-test %s\\n' ${block.file}:${block.line} >&2`);
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
  lines.push("printf '\\n::doc-test done\\n' >&2");
  return `${lines.join("\n")}\n`;
}

function runSession(session: Session): Promise<SessionResult> {
  if (session.page !== "README.md" && !existsSync(join(copy, "node_modules"))) {
    // The README's quickstart installs the copy; a run of one page alone does it here.
    execFileSync("npm", ["ci", "--prefer-offline", "--no-audit", "--no-fund"], {
      cwd: copy,
      stdio: "ignore",
    });
  }
  const blocks = blocksOf(session.page);
  const work = mkdtempSync(join(root, "session-"));
  for (const b of blocks) {
    if (b.role.kind === "file") writeFileSync(join(copy, b.role.name), b.code);
  }
  const ran = blocks.filter((b) => b.role.kind === "run" || b.role.kind === "background");
  const script = join(work, "session.sh");
  writeFileSync(script, sessionScript(session, ran, work));
  const path = [...(session.installed ? [userBin] : []), ...(session.tools ?? []), process.env.PATH].join(
    ":",
  );
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
      (text.match(/^\s*<!-- doc-test: .* -->\s*$/gm) ?? []).length,
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
  // bootseal check on the quickstart's service: every line ok or a warning, none failed.
  assert.match(r.output, /\d+ checks: \d+ ok, \d+ warnings?, 0 failed/);
  assert.match(r.output, /^ +ok +store +a probe object was written, read back and deleted$/m);
  assert.equal(
    readFileSync(join(copy, "worker-0/etc/kubernetes/join.conf"), "utf8"),
    "a secret only worker-0 can read\n",
  );
});

/** Copies what the reader already has into the working directory. */
const readerHas = (...files: string[]) => files.map((f) => `cp ${f} .`).join("\n");
const onService = {
  netns: true,
  npmStart: true,
  installed: true,
  placeholders: { "https://bootseal.example.com": SERVICE },
};

test("docs/configuration.md: npx bootseal serve on the embedded default, then a publish with curl", {
  timeout: 600_000,
}, async () => {
  const r = await runSession({
    page: "docs/configuration.md",
    netns: true,
    installed: true,
    setup: "printf '#cloud-config\\nruncmd: [[true]]\\n' > user-data.yaml",
  });
  assertSessionPassed(r);
  assert.match(r.output, /"version":1/);
});

test("docs/userdata.md: publish and take the cloud-init, Ignition and PowerShell user data", {
  timeout: 600_000,
}, async () => {
  const r = await runSession({
    ...onService,
    page: "docs/userdata.md",
    setup: `${readerHas("data/keys/controller-token", "test/fixtures/e2e/kubeadm-join.yaml", "test/fixtures/e2e/ignition-join.json")}\nprintf 'join' > payload`,
  });
  assertSessionPassed(r);
  const cloudInit = readFileSync(join(copy, "user-data"), "utf8");
  assert.match(cloudInit, /^#cloud-config\n/);
  assert.match(cloudInit, /BOOTSEAL_SERVER='http:\/\/127\.0\.0\.1:7480'/);
  const ignition = JSON.parse(readFileSync(join(copy, "config.ign"), "utf8")) as {
    ignition: { version: string };
  };
  assert.match(ignition.ignition.version, /^3\./);
  assert.match(readFileSync(join(copy, "user-data.ps1"), "utf8"), /^#ps1_sysnative/);
});

test("docs/cli.md: rotate a whole store to a second age recipient, then decrypt with it alone", {
  timeout: 600_000,
}, async () => {
  const r = await runSession({
    ...onService,
    page: "docs/cli.md",
    tools: [dirname(peer("AGE_KEYGEN_BIN"))],
    setup: [
      "npx bootseal publish --server http://127.0.0.1:7480 --machine default/worker-0 --token-file data/keys/controller-token --bootstrap-token-out worker-0.token README.md",
    ].join("\n"),
  });
  assertSessionPassed(r);
  assert.match(r.output, /rotated 1, unchanged 0, skipped 0, failed 0/);
  assert.ok(
    r.output.includes(readFileSync(join(REPO, "README.md"), "utf8").slice(0, 200)),
    `the document opened with the new identity:\n${r.output.slice(-3000)}`,
  );
});

test("docs/api.md: generate a typed client from the served OpenAPI document, in a project of the reader's", {
  timeout: 600_000,
}, async () => {
  // The page installs openapi-fetch into the reader's project; the namespace has no registry, so
  // npm's cache gets it first (the version the page names).
  execFileSync("npm", ["cache", "add", "openapi-fetch@0.17.0"], { stdio: "ignore" });
  const r = await runSession({ ...onService, page: "docs/api.md", newProject: true });
  assertSessionPassed(r);
  assert.match(
    readFileSync(join(copy, "project/bootseal-api.ts"), "utf8"),
    /"\/v1\/machines\/\{ns\}\/\{name\}\/config"/,
  );
});

test("docs/operations.md: promtool checks and tests the alert rules", { timeout: 120_000 }, async () => {
  const r = await runSession({
    page: "docs/operations.md",
    netns: false,
    installed: true,
    tools: [dirname(peer("PROMTOOL"))],
  });
  assertSessionPassed(r);
  assert.match(r.output, /SUCCESS/);
});

test("docs/providers.md: the OpenBao AppRole role for the machines, against the real OpenBao", {
  timeout: 120_000,
}, async () => {
  const env = { BAO_ADDR: peer("VAULT_ADDR"), BAO_TOKEN: peer("VAULT_TOKEN") };
  const bao = (...args: string[]) =>
    execFileSync(peer("BAO_BIN"), args, { env: { ...process.env, ...env, HOME: root } });
  bao("auth", "enable", "approle");
  try {
    const r = await runSession({
      page: "docs/providers.md",
      netns: false,
      installed: true,
      tools: [dirname(peer("BAO_BIN"))],
      env: { ...env, HOME: root },
    });
    assertSessionPassed(r);
    assert.match(r.output, /wrapping_token:/);
  } finally {
    bao("auth", "disable", "approle");
  }
});

test("docs/cluster-api.md: the chart installed as the page says, on a real API server", {
  timeout: 300_000,
}, async () => {
  const kubeconfig = join(root, "kubeconfig");
  // The reader's namespace, new each run: this API server has no namespace controller to finish deleting one.
  const namespace = `bootseal-system-${randomBytes(3).toString("hex")}`;
  writeFileSync(
    kubeconfig,
    JSON.stringify({
      apiVersion: "v1",
      kind: "Config",
      clusters: [
        {
          name: "peer",
          cluster: { server: peer("KUBE_SERVER"), "certificate-authority": peer("KUBE_CA_FILE") },
        },
      ],
      users: [{ name: "admin", user: { token: peer("KUBE_ADMIN_TOKEN") } }],
      contexts: [{ name: "peer", context: { cluster: "peer", user: "admin" } }],
      "current-context": "peer",
    }),
  );
  const r = await runSession({
    page: "docs/cluster-api.md",
    netns: false,
    installed: true,
    tools: [dirname(peer("HELM_BIN"))],
    env: { KUBECONFIG: kubeconfig, HOME: root },
    placeholders: { "=…": "=placeholder", "bootseal-system": namespace },
  });
  try {
    assertSessionPassed(r);
    const objects = execFileSync(
      "kubectl",
      ["--kubeconfig", kubeconfig, "-n", namespace, "get", "deployments,secrets", "-o", "name"],
      {
        encoding: "utf8",
      },
    );
    for (const name of [
      "deployment.apps/bootseal",
      "secret/bootseal-store",
      "secret/bootseal-derivation-key",
    ]) {
      assert.ok(
        objects.split("\n").some((line) => line.startsWith(name)),
        `${name} in ${objects}`,
      );
    }
  } finally {
    execFileSync(peer("HELM_BIN"), ["--kubeconfig", kubeconfig, "uninstall", "bootseal", "-n", namespace], {
      stdio: "ignore",
    });
  }
});

test("docs/releases.md: a signed build of the three executables, verified with sha256sum, OpenSSL, bootseal and Node", {
  timeout: 900_000,
}, async () => {
  const r = await runSession({ page: "docs/releases.md", netns: false, installed: true });
  assertSessionPassed(r);
  assert.match(r.output, /bootseal-linux-x64: OK/);
  assert.match(r.output, /Signature Verified Successfully/);
});
