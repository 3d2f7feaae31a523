/**
 * Controller credentials reload without a restart, in the real `bootseal serve` process: on
 * SIGHUP and when the config file changes. A new token works, a removed one stops, a file
 * that fails validation is refused with the credentials in force kept, and a changed key that
 * is not a controller key is named as needing a restart.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { stringify } from "yaml";
import { call, serve } from "./serve-harness.ts";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const token = () => randomBytes(32).toString("base64url");

/** Resolves once `count` lines of the output match `re`; bounded by the test's timeout. */
async function lines(output: () => string, re: RegExp, count: number): Promise<string[]> {
  for (;;) {
    const found = output()
      .split("\n")
      .filter((l) => re.test(l));
    if (found.length >= count) return found;
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("SIGHUP and a changed config file reload the controllers; an invalid file keeps them", {
  timeout: 120_000,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "bootseal-reload-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const recipient = await identityToRecipient(await generateX25519Identity());
  const [first, second, third] = [token(), token(), token()];
  const config = (controllers: { name: string; token: string }[], extra: Record<string, unknown> = {}) => ({
    store: `file://${join(dir, "store")}`,
    creation_rules: [{ age: recipient }],
    controllers: controllers.map((c) => ({
      name: c.name,
      tokenSha256: sha(c.token),
      scopes: ["status:read"],
    })),
    audit: { path: join(dir, "audit.log") },
    ...extra,
  });
  const served = await serve(dir, "reload", config([{ name: "first", token: first }]), {
    ...process.env,
    BOOTSEAL_LOG_LEVEL: "info",
  });
  t.after(() => served.stop());
  const file = join(dir, "reload.yaml");
  const status = async (tok: string) => (await call(`${served.url}/v1/machines`, { token: tok })).status;
  assert.equal(await status(first), 200);
  assert.equal(await status(second), 401);

  // SIGHUP: the file now names `second` instead of `first`.
  writeFileSync(file, stringify(config([{ name: "second", token: second }])));
  served.child.kill("SIGHUP");
  await lines(served.output, /"reason":"SIGHUP".*controllers reloaded/, 1);
  assert.equal(await status(second), 200);
  assert.equal(await status(first), 401);
  assert.equal(served.child.exitCode, null, "SIGHUP does not stop the service");

  // A changed file, no signal; the changed token settings need a restart and are named.
  const before = served
    .output()
    .split("\n")
    .filter((l) => /"reason":"file changed".*controllers reloaded/.test(l)).length;
  writeFileSync(file, stringify(config([{ name: "third", token: third }], { bootstrapToken: { uses: 3 } })));
  await lines(served.output, /"reason":"file changed".*controllers reloaded/, before + 1);
  assert.equal(await status(third), 200);
  assert.equal(await status(second), 401);
  const [warning] = await lines(served.output, /need a restart/, 1);
  assert.match(warning as string, /"keys":\["bootstrapToken"\]/);

  // An invalid file (an unknown scope) is refused; `third` keeps working.
  const bad = config([{ name: "fourth", token: first }]);
  (bad.controllers[0] as { scopes: string[] }).scopes = ["configs:everything"];
  writeFileSync(file, stringify(bad));
  const [refused] = await lines(served.output, /config reload refused/, 1);
  assert.match(refused as string, /unknown scope/);
  assert.doesNotMatch(served.output(), new RegExp(first));
  assert.equal(await status(third), 200);
  assert.equal(await status(first), 401);
  served.child.kill("SIGHUP");
  await lines(served.output, /config reload refused/, 2);
  assert.equal(await status(third), 200);
});
