/**
 * hc_vault keys that log in (AppRole, JWT) instead of holding a static token, against OpenBao.
 * The root token only sets the test up (mounts, a policy, roles, ciphertexts); every machine
 * key below has only its login settings, under a policy that allows decrypting one key.
 */
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { importPKCS8, SignJWT } from "jose";
import { keysFromUserInput } from "../../../providers/keys/index.ts";
import { cachedVaultLogin, vaultLoginFromEnv } from "../../../providers/keys/vault-auth.ts";
import { EXIT_CODES } from "../../../src/cli/exit-codes.ts";
import type { MasterKey } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../../src/errors.ts";
import { retryPolicy } from "../../../src/retry.ts";
import { encrypt, machineEnv, run } from "../../fetcher/helpers.ts";
import { peer, uniqueName } from "../../helpers/peers.ts";

type Env = Record<string, string>;
/** The parts of Vault's answers the setup reads. */
interface Answer {
  readonly data?: Record<string, string>;
  readonly wrap_info?: { readonly token: string };
}
const FAST = { attempts: 2, baseDelayMs: 10, maxDelayMs: 20, timeoutMs: 5_000 };

function rejectsWith(code: string, ...hidden: string[]) {
  return (err: unknown) => {
    assert.ok(err instanceof BootsealError && err.code === code, String(err));
    for (const secret of hidden) assert.ok(!err.message.includes(secret), "no credential in the message");
    return true;
  };
}

describe("hc_vault login on OpenBao (AppRole, JWT)", { timeout: 120_000 }, () => {
  const addr = peer("VAULT_ADDR");
  const root = peer("VAULT_TOKEN");
  const dir = mkdtempSync(join(tmpdir(), "bootseal-vault-auth-"));
  const home = join(dir, "home");
  const approle = uniqueName("bootseal-ar");
  const jwtMount = uniqueName("bootseal-jwt");
  const policy = uniqueName("bootseal-decrypt-one");
  const allowed = uniqueName("mk-login");
  const denied = uniqueName("mk-login");
  const secret = new Uint8Array(32).map((_, i) => i + 7);
  let encAllowed = "";
  let encDenied = "";
  let roleId = "";
  let signingKey: Awaited<ReturnType<typeof importPKCS8>>;

  async function admin(method: string, path: string, body?: unknown, headers: Env = {}): Promise<Answer> {
    const res = await fetch(`${addr}/v1/${path}`, {
      method,
      headers: { "X-Vault-Token": root, ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: HTTP ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Answer) : {};
  }

  /** A file only its owner reads, in the test's directory. */
  function file(name: string, content: string): string {
    const path = join(dir, name);
    writeFileSync(path, `${content}\n`, { mode: 0o600 });
    return path;
  }

  async function newSecretId(options: { uses?: number; wrap?: boolean } = {}): Promise<string> {
    const headers: Env = options.wrap ? { "X-Vault-Wrap-TTL": "120s" } : {};
    const body = options.uses ? { num_uses: options.uses } : {};
    const answer = await admin("POST", `auth/${approle}/role/machine/secret-id`, body, headers);
    const value = options.wrap ? answer.wrap_info?.token : answer.data?.secret_id;
    assert.ok(value);
    return value;
  }

  /** A machine key: its env has only login settings (HOME holds no ~/.vault-token). */
  function machineKey(key: string, env: Env): MasterKey {
    const [k] = keysFromUserInput("hc_vault", `${addr}/v1/transit/keys/${key}`, {
      env: { HOME: home, ...env },
      vaultTransit: { retry: FAST },
    });
    return k!;
  }

  function approleEnv(secretIdFile: string, extra: Env = {}): Env {
    return {
      VAULT_AUTH_METHOD: "approle",
      VAULT_AUTH_MOUNT: `auth/${approle}`,
      VAULT_ROLE_ID: roleId,
      VAULT_SECRET_ID_FILE: secretIdFile,
      ...extra,
    };
  }

  before(async () => {
    mkdirSync(home);
    for (const key of [allowed, denied]) await admin("POST", `transit/keys/${key}`);
    const [a] = keysFromUserInput("hc_vault", `${addr}/v1/transit/keys/${allowed}`, {
      env: { VAULT_TOKEN: root },
    });
    const [d] = keysFromUserInput("hc_vault", `${addr}/v1/transit/keys/${denied}`, {
      env: { VAULT_TOKEN: root },
    });
    encAllowed = await a!.wrap(secret);
    encDenied = await d!.wrap(secret);
    await admin("PUT", `sys/policies/acl/${policy}`, {
      policy: `path "transit/decrypt/${allowed}" {\n  capabilities = ["update"]\n}\n`,
    });
    const tokenSettings = { token_policies: [policy], token_ttl: "5m", token_type: "batch" };
    await admin("POST", `sys/auth/${approle}`, { type: "approle" });
    await admin("POST", `auth/${approle}/role/machine`, tokenSettings);
    roleId = (await admin("GET", `auth/${approle}/role/machine/role-id`)).data?.role_id ?? "";
    assert.ok(roleId);

    const pair = generateKeyPairSync("ec", { namedCurve: "P-256" });
    signingKey = await importPKCS8(
      pair.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      "ES256",
    );
    await admin("POST", `sys/auth/${jwtMount}`, { type: "jwt" });
    await admin("POST", `auth/${jwtMount}/config`, {
      jwt_validation_pubkeys: [pair.publicKey.export({ type: "spki", format: "pem" }).toString()],
      bound_issuer: "https://issuer.bootseal.test",
    });
    await admin("POST", `auth/${jwtMount}/role/worker-0`, {
      ...tokenSettings,
      role_type: "jwt",
      user_claim: "sub",
      bound_audiences: ["bootseal"],
      bound_claims: { machine: "default/worker-0" },
    });
  });

  after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await admin("DELETE", `sys/auth/${approle}`);
    await admin("DELETE", `sys/auth/${jwtMount}`);
    await admin("DELETE", `sys/policies/acl/${policy}`);
  });

  test("AppRole: the machine decrypts its key; the policy refuses the other key and any encrypt", async () => {
    const env = approleEnv(file("secret-id", await newSecretId()));
    assert.deepEqual(await machineKey(allowed, env).unwrap(encAllowed), secret);
    await assert.rejects(machineKey(denied, env).unwrap(encDenied), rejectsWith("KEY_ACCESS_DENIED"));
    await assert.rejects(machineKey(allowed, env).wrap(secret), rejectsWith("KEY_ACCESS_DENIED"));
    // The login token stays in memory: nothing lands in HOME (no ~/.vault-token).
    assert.deepEqual(readdirSync(home), []);
  });

  test("a wrong secret id is KEY_ACCESS_DENIED without the secret id, and no static token stands in", async () => {
    const wrong = "0f0e0d0c-not-a-secret-id-0b0a09080706";
    const env = approleEnv(file("wrong-secret-id", wrong), { VAULT_TOKEN: root });
    await assert.rejects(machineKey(allowed, env).unwrap(encAllowed), (err) => {
      rejectsWith("KEY_ACCESS_DENIED", wrong, root)(err);
      assert.match((err as Error).message, /approle login .* refused \(HTTP 400/);
      return true;
    });
  });

  test("one login per run: a single-use secret id serves two keys of one deps object", async () => {
    const env = approleEnv(file("single-use", await newSecretId({ uses: 1 })));
    const deps = { env: { HOME: home, ...env }, vaultTransit: { retry: FAST } };
    const keys = keysFromUserInput(
      "hc_vault",
      `${addr}/v1/transit/keys/${allowed},${addr}/v1/transit/keys/${denied}`,
      deps,
    );
    assert.deepEqual(await keys[0]!.unwrap(encAllowed), secret);
    // The cached token reaches transit (403 from the policy), not a second login (400).
    await assert.rejects(keys[1]!.unwrap(encDenied), (err) => {
      rejectsWith("KEY_ACCESS_DENIED")(err);
      assert.match((err as Error).message, /decrypt with .*HTTP 403/);
      return true;
    });
    // A new deps object is a new run: the secret id is spent.
    await assert.rejects(machineKey(allowed, env).unwrap(encAllowed), rejectsWith("KEY_ACCESS_DENIED"));
  });

  test("a long-lived deps object logs in again at 80% of the token's TTL, not before", async () => {
    const login = vaultLoginFromEnv(approleEnv(file("reusable", await newSecretId())));
    assert.ok(login);
    let clock = 1_000_000;
    const owner = {};
    const get = () => cachedVaultLogin(owner, addr, login, retryPolicy(FAST), undefined, () => clock);
    const first = await get();
    clock += 239_000; // the role's token_ttl is 5m: 80% is 240 s
    assert.equal(await get(), first);
    clock += 2_000;
    const second = await get();
    assert.notEqual(second, first);
    assert.equal(await get(), second);
  });

  test("a response-wrapped secret id: checked for its creation path, unwrapped once", async () => {
    const wrapping = await newSecretId({ wrap: true });
    const path = file("wrapped-secret-id", wrapping);
    const wrongPath = approleEnv(path, {
      VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH: `auth/${approle}/role/other/secret-id`,
    });
    await assert.rejects(machineKey(allowed, wrongPath).unwrap(encAllowed), (err) => {
      rejectsWith("KEY_ACCESS_DENIED", wrapping)(err);
      assert.match((err as Error).message, /was created at/);
      return true;
    });
    // The refused check did not spend it.
    const env = approleEnv(path, {
      VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH: `auth/${approle}/role/machine/secret-id`,
    });
    assert.deepEqual(await machineKey(allowed, env).unwrap(encAllowed), secret);
    await assert.rejects(
      machineKey(allowed, env).unwrap(encAllowed),
      rejectsWith("KEY_ACCESS_DENIED", wrapping),
    );
  });

  test("SOPS_HC_VAULT_ALLOWLIST refuses before the login: the single-use secret id stays unspent", async () => {
    const env = approleEnv(file("unspent", await newSecretId({ uses: 1 })));
    await assert.rejects(
      machineKey(allowed, { ...env, SOPS_HC_VAULT_ALLOWLIST: "https://vault.example.com" }).unwrap(
        encAllowed,
      ),
      rejectsWith("KEY_ACCESS_DENIED"),
    );
    assert.deepEqual(await machineKey(allowed, env).unwrap(encAllowed), secret);
  });

  async function jwtFor(claims: Record<string, string>, audience = "bootseal"): Promise<string> {
    return new SignJWT(claims)
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://issuer.bootseal.test")
      .setSubject("worker-0")
      .setAudience(audience)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(signingKey);
  }

  function jwtEnv(jwt: string, name: string): Env {
    return {
      VAULT_AUTH_METHOD: "jwt",
      VAULT_AUTH_MOUNT: jwtMount,
      VAULT_AUTH_ROLE: "worker-0",
      VAULT_JWT_FILE: file(name, jwt),
    };
  }

  test("JWT: a token signed by the configured key with the bound claim logs in and decrypts", async () => {
    const env = jwtEnv(await jwtFor({ machine: "default/worker-0" }), "good.jwt");
    assert.deepEqual(await machineKey(allowed, env).unwrap(encAllowed), secret);
    await assert.rejects(machineKey(denied, env).unwrap(encDenied), rejectsWith("KEY_ACCESS_DENIED"));
  });

  test("JWT: another machine's claim, another audience, another signer are KEY_ACCESS_DENIED", async () => {
    const other = await jwtFor({ machine: "default/worker-1" });
    const audience = await jwtFor({ machine: "default/worker-0" }, "someone-else");
    const stranger = await new SignJWT({ machine: "default/worker-0" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer("https://issuer.bootseal.test")
      .setAudience("bootseal")
      .setSubject("worker-0")
      .setExpirationTime("5m")
      .sign(generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey);
    for (const [i, jwt] of [other, audience, stranger].entries()) {
      await assert.rejects(
        machineKey(allowed, jwtEnv(jwt, `bad-${i}.jwt`)).unwrap(encAllowed),
        rejectsWith("KEY_ACCESS_DENIED", jwt),
      );
    }
  });

  test("bootseal fetch on a machine with only AppRole settings: the payload is written; a wrong secret id: no key opened it, the refused login named", async () => {
    const doc = join(dir, "payload.sops.json");
    const payload = "#cloud-config\nwrite_files: []\n";
    const uri = `${addr}/v1/transit/keys/${allowed}`;
    writeFileSync(
      doc,
      await encrypt(payload, ["--hc-vault-transit", uri, "--input-type", "binary"], { VAULT_TOKEN: root }),
    );
    const fetchOnce = async (secretIdFile: string) => {
      const root = mkdtempSync(join(dir, "root-"));
      const r = await run(
        ["fetch", "--from", `file://${doc}`, "--out", "/etc/bootstrap/user-data", "--root", root],
        machineEnv({ ...approleEnv(secretIdFile), NODE_EXTRA_CA_CERTS: process.env.NODE_EXTRA_CA_CERTS }),
      );
      return { r, root };
    };
    const good = await fetchOnce(file("fetch-secret-id", await newSecretId({ uses: 1 })));
    assert.equal(good.r.code, 0, good.r.stderr);
    assert.equal(readFileSync(join(good.root, "etc/bootstrap/user-data"), "utf8"), payload);
    const wrong = "ffffffff-wrong-secret-id-for-fetch";
    const bad = await fetchOnce(file("fetch-wrong", wrong));
    assert.equal(bad.r.code, EXIT_CODES.NO_KEY_AVAILABLE, bad.r.stderr);
    assert.match(bad.r.stderr, /approle login .*refused \(HTTP 400/);
    assert.ok(!bad.r.stderr.includes(wrong) && !bad.r.stderr.includes(roleId), "no credential in the output");
  });

  test("a missing credential file is KEY_ACCESS_DENIED naming the file; Vault down is KEY_UNAVAILABLE", async () => {
    const missing = join(dir, "no-such-secret-id");
    await assert.rejects(machineKey(allowed, approleEnv(missing)).unwrap(encAllowed), (err) => {
      rejectsWith("KEY_ACCESS_DENIED")(err);
      assert.ok((err as Error).message.includes(missing));
      return true;
    });
    const port = await closedPort();
    const [down] = keysFromUserInput("hc_vault", `http://127.0.0.1:${port}/v1/transit/keys/${allowed}`, {
      env: { HOME: home, ...approleEnv(file("down", "any")) },
      vaultTransit: { retry: FAST },
    });
    await assert.rejects(down!.unwrap(encAllowed), rejectsWith("KEY_UNAVAILABLE"));
  });
});

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
