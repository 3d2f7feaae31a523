/**
 * Vault login settings from the environment (providers/keys/vault-auth.ts): which variables
 * each method needs, Vault Agent's mount spellings, and USAGE for what cannot work. The logins
 * themselves run against OpenBao in vault-auth.test.ts.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { KUBERNETES_TOKEN_PATH, vaultLoginFromEnv } from "../../../providers/keys/vault-auth.ts";
import { BootsealError } from "../../../src/errors.ts";

const usage = (err: unknown) => err instanceof BootsealError && err.code === "USAGE";

describe("VAULT_AUTH_METHOD and its variables", () => {
  test("unset or token: no login (the static VAULT_TOKEN / ~/.vault-token path)", () => {
    assert.equal(vaultLoginFromEnv({}), null);
    assert.equal(vaultLoginFromEnv({ VAULT_AUTH_METHOD: "token", VAULT_ROLE_ID: "x" }), null);
  });

  test("approle: role id from the variable or a file, secret id file, wrapping path without slashes", () => {
    assert.deepEqual(
      vaultLoginFromEnv({ VAULT_AUTH_METHOD: "AppRole", VAULT_ROLE_ID: "rid", VAULT_SECRET_ID_FILE: "/s" }),
      {
        method: "approle",
        mount: "approle",
        roleId: { value: "rid" },
        secretIdFile: "/s",
        wrappingPath: null,
      },
    );
    assert.deepEqual(
      vaultLoginFromEnv({
        VAULT_AUTH_METHOD: "approle",
        VAULT_AUTH_MOUNT: "/auth/team-a/approle/",
        VAULT_ROLE_ID_FILE: "/r",
        VAULT_SECRET_ID_FILE: "/s",
        VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH: "/auth/team-a/approle/role/m/secret-id",
      }),
      {
        method: "approle",
        mount: "team-a/approle",
        roleId: { file: "/r" },
        secretIdFile: "/s",
        wrappingPath: "auth/team-a/approle/role/m/secret-id",
      },
    );
    // bind_secret_id=false roles log in with the role id alone.
    assert.equal(
      (vaultLoginFromEnv({ VAULT_AUTH_METHOD: "approle", VAULT_ROLE_ID: "rid" }) as { secretIdFile: null })
        .secretIdFile,
      null,
    );
  });

  test("jwt needs a role and a file; kubernetes defaults to the pod's service account token", () => {
    assert.deepEqual(
      vaultLoginFromEnv({ VAULT_AUTH_METHOD: "jwt", VAULT_AUTH_ROLE: "m", VAULT_JWT_FILE: "/id.jwt" }),
      { method: "jwt", mount: "jwt", role: "m", jwtFile: "/id.jwt" },
    );
    assert.deepEqual(vaultLoginFromEnv({ VAULT_AUTH_METHOD: "kubernetes", VAULT_AUTH_ROLE: "m" }), {
      method: "kubernetes",
      mount: "kubernetes",
      role: "m",
      jwtFile: KUBERNETES_TOKEN_PATH,
    });
  });

  test("what cannot log in is USAGE, naming the variable", () => {
    const cases: Record<string, string | undefined>[] = [
      { VAULT_AUTH_METHOD: "userpass" },
      { VAULT_AUTH_METHOD: "approle" },
      { VAULT_AUTH_METHOD: "approle", VAULT_ROLE_ID: "a", VAULT_ROLE_ID_FILE: "/r" },
      { VAULT_AUTH_METHOD: "approle", VAULT_ROLE_ID: "a", VAULT_SECRET_ID_RESPONSE_WRAPPING_PATH: "auth/x" },
      { VAULT_AUTH_METHOD: "jwt", VAULT_JWT_FILE: "/j" },
      { VAULT_AUTH_METHOD: "jwt", VAULT_AUTH_ROLE: "m" },
      { VAULT_AUTH_METHOD: "kubernetes", VAULT_AUTH_ROLE: "m", VAULT_AUTH_MOUNT: "../sys" },
    ];
    for (const env of cases) {
      assert.throws(
        () => vaultLoginFromEnv(env),
        (err) => {
          assert.ok(usage(err), `${JSON.stringify(env)}: ${String(err)}`);
          assert.match((err as Error).message, /VAULT_/);
          return true;
        },
      );
    }
  });
});
