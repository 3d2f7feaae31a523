/**
 * The AWS KMS smoke test shared by every KMS peer: Encrypt/Decrypt/GenerateDataKey bound to an
 * encryption context, and a wrong or missing context refused.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CreateKeyCommand,
  DecryptCommand,
  EncryptCommand,
  GenerateDataKeyCommand,
  KMSClient,
  KMSServiceException,
} from "@aws-sdk/client-kms";

export interface KmsSmokeOptions {
  server: string;
  endpoint: string;
  /** The SDK error name for Decrypt with a context other than the one used to encrypt. */
  wrongContextError: string;
}

async function errorName(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof KMSServiceException, `expected a KMS service error, got ${String(err)}`);
    assert.equal(err.$metadata.httpStatusCode, 400);
    return err.name;
  }
  assert.fail("Decrypt succeeded but should have been refused");
}

export function kmsSmoke(o: KmsSmokeOptions): void {
  test(`${o.server}: KMS encrypt, decrypt and data keys bound to an encryption context`, async (t) => {
    const kms = new KMSClient({
      endpoint: o.endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "testing", secretAccessKey: "testing" },
    });
    t.after(() => kms.destroy());
    const key = await kms.send(new CreateKeyCommand({ Description: "bootseal smoke test" }));
    const keyId = key.KeyMetadata!.Arn!;
    assert.match(keyId, /^arn:aws:kms:us-east-1:\d{12}:key\/[0-9a-f-]{36}$/);
    const context = { "bootseal-machine": "default/worker-0" };
    const wrong = { "bootseal-machine": "default/worker-1" };

    await t.test("Encrypt then Decrypt with the same context", async () => {
      const plaintext = new Uint8Array(32).map((_, i) => i);
      const enc = await kms.send(
        new EncryptCommand({ KeyId: keyId, Plaintext: plaintext, EncryptionContext: context }),
      );
      assert.ok(enc.CiphertextBlob && enc.CiphertextBlob.length > 32);
      assert.equal(enc.KeyId, keyId);
      const dec = await kms.send(
        new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, EncryptionContext: context }),
      );
      assert.deepEqual(Buffer.from(dec.Plaintext!), Buffer.from(plaintext));
      assert.equal(dec.KeyId, keyId);

      const refusedWrong = await errorName(
        kms.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob, EncryptionContext: wrong })),
      );
      assert.equal(refusedWrong, o.wrongContextError);
      const refusedNone = await errorName(
        kms.send(new DecryptCommand({ CiphertextBlob: enc.CiphertextBlob })),
      );
      assert.equal(refusedNone, o.wrongContextError);
    });

    await t.test("GenerateDataKey returns a 32-byte key that Decrypt recovers with the context", async () => {
      const dk = await kms.send(
        new GenerateDataKeyCommand({ KeyId: keyId, KeySpec: "AES_256", EncryptionContext: context }),
      );
      assert.equal(dk.Plaintext?.length, 32);
      const dec = await kms.send(
        new DecryptCommand({ CiphertextBlob: dk.CiphertextBlob, EncryptionContext: context }),
      );
      assert.deepEqual(Buffer.from(dec.Plaintext!), Buffer.from(dk.Plaintext!));
      assert.equal(
        await errorName(
          kms.send(new DecryptCommand({ CiphertextBlob: dk.CiphertextBlob, EncryptionContext: wrong })),
        ),
        o.wrongContextError,
      );
    });
  });
}
