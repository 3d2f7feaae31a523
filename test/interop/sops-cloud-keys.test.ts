/**
 * Cloud master keys across the two tools, with the real sops 3.13.2 pointed at the same
 * emulators (AWS_ENDPOINT_URL_KMS for moto and local-kms, VAULT_ADDR/VAULT_TOKEN for OpenBao):
 * documents bootseal's library writes open with `sops decrypt` using only that key, and
 * documents `sops encrypt` writes open with bootseal's providers. sops cannot be pointed at
 * fake-cloud-kms (plaintext gRPC) or lowkey-vault, so GCP and Azure are not here
 * (docs/compatibility.md).
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { CreateKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import type { KeyKind, ProviderDeps } from "../../providers/keys/index.ts";
import { KEY_KINDS, keysFromUserInput, resolverFor } from "../../providers/keys/index.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import { decryptDocument } from "../../src/envelope/sops/decrypt.ts";
import { encryptDocument } from "../../src/envelope/sops/encrypt.ts";
import type { KeyEntry, MasterKey } from "../../src/envelope/sops/master-key.ts";
import { metadataFromTree, metadataToTree } from "../../src/envelope/sops/metadata.ts";
import { BootsealError } from "../../src/errors.ts";
import { peer, uniqueName } from "../helpers/peers.ts";

const PLAIN = "join_token: abcdef.0123456789abcdef\nca_hash: sha256:00ff\nnested:\n    port: 6443\n";
const CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };
const yaml = codecFor("yaml");
const dir = mkdtempSync(join(tmpdir(), "bootseal-cloud-interop-"));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the real sops with only the given environment: no age key, no GnuPG home. */
function sops(
  args: string[],
  env: Record<string, string>,
): Promise<{ status: number; stdout: string; stderr: string }> {
  const full = { PATH: process.env.PATH ?? "", HOME: dir, ...env };
  return new Promise((resolve) => {
    execFile(peer("SOPS_BIN"), args, { env: full, cwd: dir }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === "number" ? err.code : 1) : 0;
      resolve({ status, stdout, stderr });
    });
  });
}

function ok(r: { status: number; stdout: string; stderr: string }, what: string): string {
  assert.equal(r.status, 0, `${what} failed: ${r.stderr.trim()}`);
  return r.stdout;
}

/** A document written by bootseal's library (encryptDocument + the YAML codec). */
async function bootsealEncrypt(keys: MasterKey[]): Promise<string> {
  const { branches, metadata } = await encryptDocument(yaml.parsePlain(Buffer.from(PLAIN)), {
    keyGroups: [keys],
  });
  return Buffer.from(yaml.emitEncrypted(branches, metadataToTree(metadata, KEY_KINDS))).toString("utf8");
}

/** Opens a document with bootseal's providers; also returns its entries of `kind`. */
async function bootsealDecrypt(
  text: string,
  deps: ProviderDeps,
  kind: KeyKind,
): Promise<{ plain: string; entries: KeyEntry[] }> {
  const parsed = yaml.parseEncrypted(Buffer.from(text));
  const metadata = metadataFromTree(parsed.metadata, KEY_KINDS);
  const branches = await decryptDocument(parsed.branches, metadata, { resolve: resolverFor(deps) });
  const entries = metadata.keyGroups.flat().filter((e) => e.kind === kind);
  return { plain: Buffer.from(yaml.emitPlain(branches)).toString("utf8"), entries };
}

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

for (const [server, endpointPeer] of [
  ["moto", "KMS_MOTO_ENDPOINT"],
  ["local-kms", "KMS_LOCAL_ENDPOINT"],
] as const) {
  describe(`AWS KMS with sops on ${server}`, () => {
    const context = { "bootseal-machine": "default/m1" };
    const setup = async () => {
      const endpoint = peer(endpointPeer);
      const kms = new KMSClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
      const arn = (await kms.send(new CreateKeyCommand({ Description: "bootseal interop" }))).KeyMetadata
        ?.Arn;
      kms.destroy();
      assert.ok(arn);
      const env = {
        AWS_ENDPOINT_URL_KMS: endpoint,
        AWS_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
        AWS_REGION: "us-east-1",
      };
      const deps: ProviderDeps = { env: {}, awsKms: { endpoint, credentials: CREDENTIALS } };
      const entryFor = (ctx: Record<string, string>) => ({
        kind: "kms" as const,
        enc: "",
        fields: new Map<string, string | Record<string, string>>([
          ["arn", arn],
          ["context", ctx],
          ["aws_profile", ""],
        ]),
      });
      return { arn, env, deps, key: (ctx = context) => resolverFor(deps)(entryFor(ctx)) as MasterKey };
    };

    test("bootseal writes with a context; sops decrypt opens it with KMS only", async () => {
      const { env, key } = await setup();
      const text = await bootsealEncrypt([key()]);
      assert.match(text, /bootseal-machine: default\/m1/);
      assert.doesNotMatch(text, /\bage:|\bpgp:/, "KMS is the only key");
      const path = write(`bootseal-${server}.enc.yaml`, text);
      assert.equal(ok(await sops(["decrypt", path], env), "sops decrypt"), PLAIN);
      // The context is bound: edit it in the file and sops can no longer unwrap.
      const other = write(`bootseal-${server}-m2.enc.yaml`, text.replace("default/m1", "default/m2"));
      const refused = await sops(["decrypt", other], env);
      assert.notEqual(refused.status, 0);
      assert.match(refused.stderr, /InvalidCiphertext|data key/i);
    });

    test("sops encrypt --kms --encryption-context writes; bootseal opens it with its key", async () => {
      const { arn, env, deps } = await setup();
      const plainPath = write(`plain-${server}.yaml`, PLAIN);
      const text = ok(
        await sops(
          ["encrypt", "--kms", arn, "--encryption-context", "bootseal-machine:default/m1", plainPath],
          env,
        ),
        "sops encrypt",
      );
      const { plain, entries } = await bootsealDecrypt(text, deps, "kms");
      assert.equal(plain, PLAIN);
      assert.equal(entries.length, 1);
      assert.deepEqual(entries[0]?.fields.get("context"), context);
      assert.equal(entries[0]?.fields.get("aws_profile"), "", "sops writes aws_profile even when empty");
      // The same entry under another machine's context does not open.
      const entry = entries[0] as KeyEntry;
      const fields = new Map(entry.fields);
      fields.set("context", { "bootseal-machine": "default/m2" });
      const wrong = resolverFor(deps)({ ...entry, fields });
      await assert.rejects(
        wrong!.unwrap(entry.enc),
        (err) => err instanceof BootsealError && err.code === "BAD_INPUT",
      );
    });

    test("our kms entry has the same fields as sops's", async () => {
      const { arn, env, key } = await setup();
      const ours = yaml.parseEncrypted(Buffer.from(await bootsealEncrypt([key()])));
      const theirs = yaml.parseEncrypted(
        Buffer.from(
          ok(
            await sops(
              [
                "encrypt",
                "--kms",
                arn,
                "--encryption-context",
                "bootseal-machine:default/m1",
                write("f.yaml", PLAIN),
              ],
              env,
            ),
            "sops encrypt",
          ),
        ),
      );
      const names = (t: typeof ours) =>
        [...(metadataFromTree(t.metadata, KEY_KINDS).keyGroups[0]?.[0]?.fields.keys() ?? [])].sort();
      assert.deepEqual(names(ours), names(theirs));
    });
  });
}

describe("Vault transit with sops on OpenBao", () => {
  const setup = async () => {
    const addr = peer("VAULT_ADDR");
    const token = peer("VAULT_TOKEN");
    const name = uniqueName("mk-contract-interop");
    const res = await fetch(`${addr}/v1/transit/keys/${name}`, {
      method: "POST",
      headers: { "X-Vault-Token": token },
    });
    assert.ok(res.ok, `create transit key: HTTP ${res.status}`);
    const uri = `${addr}/v1/transit/keys/${name}`;
    return { uri, env: { VAULT_ADDR: addr, VAULT_TOKEN: token }, deps: { env: { VAULT_TOKEN: token } } };
  };

  test("bootseal writes; sops decrypt opens it with the transit key only", async () => {
    const { uri, env, deps } = await setup();
    const text = await bootsealEncrypt(keysFromUserInput("hc_vault", uri, deps));
    assert.match(text, /enc: vault:v1:/);
    const path = write("bootseal-vault.enc.yaml", text);
    assert.equal(ok(await sops(["decrypt", path], env), "sops decrypt"), PLAIN);
  });

  test("sops encrypt --hc-vault-transit writes; bootseal opens it", async () => {
    const { uri, env, deps } = await setup();
    const text = ok(
      await sops(["encrypt", "--hc-vault-transit", uri, write("plain-vault.yaml", PLAIN)], env),
      "sops encrypt",
    );
    const { plain, entries } = await bootsealDecrypt(text, deps, "hc_vault");
    assert.equal(plain, PLAIN);
    assert.equal(entries.length, 1);
    const [key] = keysFromUserInput("hc_vault", uri, deps);
    const identifying = (fields: ReadonlyMap<string, unknown> | undefined) =>
      Object.fromEntries([...(fields ?? [])].filter(([k]) => k !== "created_at" && k !== "enc"));
    assert.deepEqual(
      identifying(entries[0]?.fields),
      identifying(key?.toMetadata("x", new Date()).fields),
      "sops and bootseal record the same address, engine path and key name",
    );
  });
});
