/**
 * AWS KMS master keys beyond the contract: sops's identity strings and field layout, the
 * machine encryption context on both emulators, roles through STS, profiles, error classes,
 * and generateDataKey.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CreateKeyCommand, DisableKeyCommand, KMSClient } from "@aws-sdk/client-kms";
import { awsKmsKeyType, generateDataKey, kmsKeyId } from "../../../providers/keys/aws-kms.ts";
import { mapKmsError, stsSessionName } from "../../../providers/keys/aws-kms-client.ts";
import type { ProviderDeps } from "../../../providers/keys/index.ts";
import { keysFromUserInput, resolverFor } from "../../../providers/keys/index.ts";
import type { KeyEntry, KeyFieldValue } from "../../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer } from "../../helpers/peers.ts";

const CREDENTIALS = { accessKeyId: "testing", secretAccessKey: "testing" };
const ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";
const ROLE = "arn:aws:iam::111122223333:role/bootseal";

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

function kmsEntry(fields: [string, KeyFieldValue][]): KeyEntry {
  return { kind: "kms", enc: "", fields: new Map(fields) };
}

async function createKey(endpoint: string): Promise<string> {
  const kms = new KMSClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
  try {
    const arn = (await kms.send(new CreateKeyCommand({ Description: "bootseal aws-kms test" }))).KeyMetadata
      ?.Arn;
    assert.ok(arn);
    return arn;
  } finally {
    kms.destroy();
  }
}

describe("identity strings and metadata layout (sops kms/keysource.go)", () => {
  test("id: arn, +role, |sorted context, |profile", () => {
    const none = { role: "", context: undefined, profile: "" };
    assert.equal(kmsKeyId({ arn: ARN, ...none }), ARN);
    assert.equal(kmsKeyId({ arn: ARN, ...none, role: ROLE }), `${ARN}+${ROLE}`);
    assert.equal(kmsKeyId({ arn: ARN, ...none, context: { b: "2", a: "1" } }), `${ARN}|a:1,b:2`);
    assert.equal(kmsKeyId({ arn: ARN, ...none, profile: "prod" }), `${ARN}||prod`);
    assert.equal(
      kmsKeyId({ arn: ARN, role: ROLE, context: { a: "1" }, profile: "p" }),
      `${ARN}+${ROLE}|a:1|p`,
    );
  });

  test("fromUserInput: comma list, spaces removed, ARN+ROLE split at +arn:", () => {
    const keys = keysFromUserInput("kms", ` ${ARN} , ${ARN}+${ROLE},`, {});
    assert.deepEqual(
      keys.map((k) => k.id),
      [ARN, `${ARN}+${ROLE}`],
    );
    const entry = keys[1]?.toMetadata("ZW5j", new Date("2026-03-04T05:06:07.999Z"));
    assert.deepEqual(
      [...(entry?.fields ?? [])],
      [
        ["arn", ARN],
        ["role", ROLE],
        ["created_at", "2026-03-04T05:06:07Z"],
        ["enc", "ZW5j"],
        ["aws_profile", ""],
      ],
    );
  });

  test("toMetadata keeps sops's order, writes aws_profile always and the context when set", () => {
    const key = awsKmsKeyType.fromMetadata(
      kmsEntry([
        ["arn", ARN],
        ["context", { "bootseal-machine": "default/m1" }],
        ["aws_profile", "ops"],
      ]),
      {},
    );
    const entry = key.toMetadata("ZW5j", new Date(0));
    assert.deepEqual([...entry.fields.keys()], ["arn", "context", "created_at", "enc", "aws_profile"]);
    assert.deepEqual(entry.fields.get("context"), { "bootseal-machine": "default/m1" });
    assert.equal(key.id, `${ARN}|bootseal-machine:default/m1|ops`);
  });

  test("malformed entries and ARNs are refused when configured", () => {
    assert.throws(() => keysFromUserInput("kms", "arn:aws:s3:::bucket", {}), code("BAD_INPUT"));
    assert.throws(() => awsKmsKeyType.fromMetadata(kmsEntry([["aws_profile", ""]]), {}), code("BAD_INPUT"));
    assert.throws(
      () =>
        awsKmsKeyType.fromMetadata(
          kmsEntry([
            ["arn", ARN],
            ["created_at", "yesterday"],
          ]),
          {},
        ),
      code("BAD_INPUT"),
    );
    assert.throws(
      () =>
        awsKmsKeyType.fromMetadata(
          kmsEntry([
            ["arn", ARN],
            ["context", "a:b"],
          ]),
          {},
        ),
      code("BAD_INPUT"),
    );
  });

  test("STS session name as sops builds it", () => {
    assert.equal(stsSessionName("build host_01.example"), "sops@buildhost_01.example");
    assert.equal(stsSessionName("x".repeat(100)).length, 64);
  });

  test("service errors map to codes by class", () => {
    const err = (name: string, status?: number) => ({ name, $metadata: { httpStatusCode: status } });
    assert.equal(mapKmsError(err("AccessDeniedException", 400), ARN, "decrypt").code, "KEY_ACCESS_DENIED");
    assert.equal(mapKmsError(err("NotFoundException", 400), ARN, "decrypt").code, "KEY_NOT_FOUND");
    assert.equal(mapKmsError(err("InvalidCiphertextException", 400), ARN, "decrypt").code, "BAD_INPUT");
    assert.equal(mapKmsError(err("ThrottlingException", 400), ARN, "decrypt").code, "KEY_UNAVAILABLE");
    assert.equal(mapKmsError(err("InternalServerError", 503), ARN, "decrypt").code, "KEY_UNAVAILABLE");
    const refused = mapKmsError({ name: "Error", code: "ECONNREFUSED" }, ARN, "encrypt");
    assert.equal(refused.code, "KEY_UNAVAILABLE");
    assert.match(refused.message, /unreachable/);
    assert.ok(refused.message.includes(ARN), "the message names the key");
  });
});

// What each emulator answers for a Decrypt of another key's ciphertext under our KeyId: AWS
// says IncorrectKeyException (BAD_INPUT), as local-kms does; moto says AccessDeniedException.
for (const [server, endpointPeer, otherKeyCode] of [
  ["moto", "KMS_MOTO_ENDPOINT", "KEY_ACCESS_DENIED"],
  ["local-kms", "KMS_LOCAL_ENDPOINT", "BAD_INPUT"],
] as const) {
  describe(`AWS KMS on ${server}`, () => {
    let endpoint: string;
    let arn: string;
    let deps: ProviderDeps;
    const machine = (name: string, d: ProviderDeps = deps) =>
      awsKmsKeyType.fromMetadata(
        kmsEntry([
          ["arn", arn],
          ["context", { "bootseal-machine": name }],
          ["aws_profile", ""],
        ]),
        d,
      );
    before(async () => {
      endpoint = peer(endpointPeer);
      arn = await createKey(endpoint);
      deps = { env: {}, awsKms: { endpoint, credentials: CREDENTIALS } };
    });

    test("the machine context round trips; the same enc under default/m2 is refused (enforced)", async () => {
      const secret = new Uint8Array(32).map((_, i) => i * 7);
      const enc = await machine("default/m1").wrap(secret);
      assert.deepEqual(await machine("default/m1").unwrap(enc), secret);
      await assert.rejects(machine("default/m2").unwrap(enc), (err) => {
        assert.ok(err instanceof BootsealError);
        assert.equal(err.code, "BAD_INPUT");
        assert.match(err.message, /wrong encryption context or ciphertext/);
        assert.ok(err.message.includes(arn));
        return true;
      });
      // No context at all is refused too.
      await assert.rejects(keysFromUserInput("kms", arn, deps)[0]!.unwrap(enc), code("BAD_INPUT"));
    });

    test("the endpoint comes from AWS_ENDPOINT_URL_KMS in deps.env; the region from the ARN", async () => {
      const [key] = keysFromUserInput("kms", arn, {
        env: { AWS_ENDPOINT_URL_KMS: endpoint },
        awsKms: { credentials: CREDENTIALS },
      });
      const enc = await key!.wrap(new Uint8Array(32).fill(1));
      assert.deepEqual(await key!.unwrap(enc), new Uint8Array(32).fill(1));
    });

    test("another key's enc under the right ARN is refused, never decrypted", async () => {
      const otherArn = await createKey(endpoint);
      const [other] = keysFromUserInput("kms", otherArn, deps);
      const enc = await other!.wrap(new Uint8Array(32).fill(9));
      const [mine] = keysFromUserInput("kms", arn, deps);
      await assert.rejects(mine!.unwrap(enc), code(otherKeyCode));
    });

    test("an unknown key is KEY_NOT_FOUND, naming the ARN", async () => {
      const missing = arn.replace(/key\/.*/, "key/00000000-0000-4000-8000-000000000000");
      const [key] = keysFromUserInput("kms", missing, deps);
      await assert.rejects(key!.wrap(new Uint8Array(32)), (err) => {
        assert.ok(err instanceof BootsealError && err.code === "KEY_NOT_FOUND", String(err));
        assert.ok(err.message.includes(missing));
        return true;
      });
    });

    test("generateDataKey gives 32 bytes whose enc a kms entry with the same context opens", async () => {
      const context = { "bootseal-machine": "default/m1" };
      const { plaintext, enc } = await generateDataKey(arn, context, deps);
      assert.equal(plaintext.length, 32);
      assert.deepEqual(await machine("default/m1").unwrap(enc), plaintext);
      await assert.rejects(machine("default/m2").unwrap(enc), code("BAD_INPUT"));
      plaintext.fill(0);
    });

    test("through the registry resolver, as a document's entry", async () => {
      const enc = await machine("default/m1").wrap(new Uint8Array(32).fill(3));
      const entry = machine("default/m1").toMetadata(enc, new Date());
      assert.deepEqual(await resolverFor(deps)(entry)?.unwrap(entry.enc), new Uint8Array(32).fill(3));
    });
  });
}

test("local-kms: a disabled key is KEY_ACCESS_DENIED (moto does not enforce DisableKey)", async () => {
  const endpoint = peer("KMS_LOCAL_ENDPOINT");
  const disabled = await createKey(endpoint);
  const kms = new KMSClient({ endpoint, region: "us-east-1", credentials: CREDENTIALS });
  await kms.send(new DisableKeyCommand({ KeyId: disabled }));
  kms.destroy();
  const [key] = keysFromUserInput("kms", disabled, {
    env: {},
    awsKms: { endpoint, credentials: CREDENTIALS },
  });
  await assert.rejects(key!.wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED"));
});

describe("moto only: roles and profiles", () => {
  let endpoint: string;
  let arn: string;
  const dir = mkdtempSync(join(tmpdir(), "bootseal-aws-"));
  const saved = { ...process.env };
  before(async () => {
    endpoint = peer("KMS_MOTO_ENDPOINT");
    arn = await createKey(endpoint);
  });
  after(() => {
    rmSync(dir, { recursive: true, force: true });
    for (const k of [
      "AWS_SHARED_CREDENTIALS_FILE",
      "AWS_CONFIG_FILE",
      "AWS_ACCESS_KEY_ID",
      "AWS_SECRET_ACCESS_KEY",
    ]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  test("ARN+ROLE assumes the role through STS (moto) and keeps role in the entry", async () => {
    const deps = { env: {}, awsKms: { endpoint, stsEndpoint: endpoint, credentials: CREDENTIALS } };
    // moto keeps keys per account and gives an assumed role its own account's credentials:
    // a role in another account cannot see the key, which shows the role's credentials are used.
    const [elsewhere] = keysFromUserInput("kms", `${arn}+${ROLE}`, deps);
    await assert.rejects(elsewhere!.wrap(new Uint8Array(32)), code("KEY_NOT_FOUND"));
    const account = /:(\d{12}):key\//.exec(arn)?.[1];
    const [key] = keysFromUserInput("kms", `${arn}+arn:aws:iam::${account}:role/bootseal`, deps);
    const enc = await key!.wrap(new Uint8Array(32).fill(5));
    const entry = key!.toMetadata(enc, new Date());
    assert.equal(entry.fields.get("role"), `arn:aws:iam::${account}:role/bootseal`);
    assert.deepEqual(await resolverFor(deps)(entry)?.unwrap(enc), new Uint8Array(32).fill(5));
  });

  test("aws_profile picks a shared-config profile; a missing profile means no credential here", async () => {
    writeFileSync(
      join(dir, "credentials"),
      "[bootseal-test]\naws_access_key_id = testing\naws_secret_access_key = testing\n",
    );
    writeFileSync(join(dir, "config"), "[profile bootseal-test]\nregion = us-east-1\n");
    process.env.AWS_SHARED_CREDENTIALS_FILE = join(dir, "credentials");
    process.env.AWS_CONFIG_FILE = join(dir, "config");
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_SECRET_ACCESS_KEY;
    const profiled = (profile: string) =>
      awsKmsKeyType.fromMetadata(
        kmsEntry([
          ["arn", arn],
          ["aws_profile", profile],
        ]),
        {
          env: {},
          awsKms: { endpoint, retry: { attempts: 1 } },
        },
      );
    const enc = await profiled("bootseal-test").wrap(new Uint8Array(32).fill(6));
    assert.equal(profiled("bootseal-test").id, `${arn}||bootseal-test`);
    assert.deepEqual(await profiled("bootseal-test").unwrap(enc), new Uint8Array(32).fill(6));
    assert.equal(await profiled("no-such-profile").unwrap(enc), null);
    await assert.rejects(profiled("no-such-profile").wrap(new Uint8Array(32)), code("KEY_ACCESS_DENIED"));
  });
});
