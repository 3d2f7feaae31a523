/**
 * The service side of the end-to-end tests: the service as `npm start` starts it (package.json's
 * `start` script, literally: `npm start -- --config FILE --listen ADDRESS` in the repository,
 * so the bundle dist/cli/main.js with the script's Node flags, and its `prestart` build, a no-op
 * once test/helpers/built-sea.ts built this tree), serving the real single executables from
 * its default artifacts directory, the package's sea/. The configuration file is an
 * operator's: a file store, an age recipient for the machine, a controller, a token
 * derivation key (so GET …/userdata is stable), its data directory and audit log in the test's
 * directory; it names no artifacts directory and no signing key (both defaults).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { access, mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { REPO } from "../fetcher/helpers.ts";
import { builtSea } from "../helpers/built-sea.ts";
import { freePort } from "../helpers/ports.ts";
import { until } from "../helpers/until.ts";

export const DIST = join(REPO, "dist/cli/main.js");

/** Builds dist/ once when it is missing (bounded). */
export async function ensureBundle(): Promise<void> {
  // The bundle itself (dist/cli/main.js is only the Node-version entry that loads it).
  const built = await access(join(REPO, "dist/cli/bootseal.js")).then(
    () => true,
    () => false,
  );
  if (built) return;
  const r = spawnSync(process.execPath, ["scripts/bundle.ts"], {
    cwd: REPO,
    encoding: "utf8",
    timeout: 300_000,
  });
  assert.equal(r.status, 0, `scripts/bundle.ts: ${r.stderr}`);
}

export interface E2EService {
  readonly url: string;
  readonly controllerToken: string;
  readonly controllerTokenFile: string;
  log(): string;
  stop(): Promise<void>;
  get(path: string): Promise<Response>;
}

export async function startE2EService(opts: {
  dir: string;
  ageRecipient: string;
  bootstrapCommands: readonly { match: string; command: string }[];
  /** More controllers, each limited to its namespaces (a tenant's token). */
  controllers?: readonly {
    name: string;
    token: string;
    scopes: readonly string[];
    namespaces: readonly string[];
  }[];
  /** More top-level configuration (YAML lines), e.g. controllerAuth and kubernetesBindings. */
  configLines?: readonly string[];
  /** Creation rules (YAML lines of list items) tried before the catch-all age rule. */
  rulesFirst?: readonly string[];
}): Promise<E2EService> {
  const { dir } = opts;
  const controllerToken = randomBytes(24).toString("hex");
  const controllerTokenFile = join(dir, "controller-token");
  await writeFile(controllerTokenFile, controllerToken, { mode: 0o600 });
  const derivationKey = join(dir, "token-derivation.key");
  await writeFile(derivationKey, randomBytes(32), { mode: 0o600 });
  await mkdir(join(dir, "store"));
  const config = join(dir, "bootseal.yaml");
  await writeFile(
    config,
    [
      `store: file://${join(dir, "store")}`,
      "creation_rules:",
      ...(opts.rulesFirst ?? []),
      "  - path_regex: .*",
      `    age: ${opts.ageRecipient}`,
      "controllers:",
      "  - name: e2e",
      `    tokenSha256: ${createHash("sha256").update(controllerToken).digest("hex")}`,
      "    scopes: [configs:write, tokens:mint, configs:read, status:read]",
      ...(opts.controllers ?? []).flatMap((c) => [
        `  - name: ${c.name}`,
        `    tokenSha256: ${createHash("sha256").update(c.token).digest("hex")}`,
        `    scopes: [${c.scopes.join(", ")}]`,
        `    namespaces: [${c.namespaces.map((n) => JSON.stringify(n)).join(", ")}]`,
      ]),
      "bootstrapToken:",
      "  ttl: 1h",
      "  uses: 20",
      `  derivationKeyFile: ${derivationKey}`,
      "bootstrapCommands:",
      ...opts.bootstrapCommands.flatMap((c) => [
        `  - match: ${JSON.stringify(c.match)}`,
        `    command: ${JSON.stringify(c.command)}`,
      ]),
      `dataDir: ${join(dir, "data")}`,
      "audit:",
      `  path: ${join(dir, "audit.log")}`,
      "logLevel: warn",
      ...(opts.configLines ?? []),
      "",
    ].join("\n"),
  );
  await builtSea();
  const port = await freePort();
  // Its own process group: npm, the script's shell and the service stop together.
  const child: ChildProcess = spawn(
    "npm",
    ["start", "--", "--config", config, "--listen", `127.0.0.1:${port}`],
    {
      cwd: REPO,
      detached: true,
      env: { PATH: process.env.PATH, HOME: dir, npm_config_update_notifier: "false" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  child.stdout?.on("data", (c) => {
    output += c;
  });
  child.stderr?.on("data", (c) => {
    output += c;
  });
  // 'close': every process of the group that held the pipes has exited, the service included.
  const closed = new Promise<void>((r) => child.once("close", () => r()));
  const stop = () => {
    try {
      process.kill(-(child.pid as number), "SIGTERM");
    } catch {
      // ESRCH: the group has already gone.
    }
    return closed;
  };
  const url = `http://127.0.0.1:${port}`;
  // Up once /healthz answers and the artifacts are hashed (the stub needs their pins).
  await until(
    "npm start to serve with its artifacts",
    async () => {
      if (child.exitCode !== null) throw new Error(`npm start exited: ${output}`);
      const res = await fetch(`${url}/v1/artifacts/SHA256SUMS`).catch(() => undefined);
      return res?.status === 200 && (await res.text()).includes("bootseal-linux-x64");
    },
    { tries: 900 },
  ).catch(async (err: unknown) => {
    await stop();
    throw err;
  });
  const auth = { authorization: `Bearer ${controllerToken}` };
  return {
    url,
    controllerToken,
    controllerTokenFile,
    log: () => output,
    get: (path) => fetch(`${url}${path}`, { headers: auth }),
    stop,
  };
}
