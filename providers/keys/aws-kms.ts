/**
 * AWS KMS master keys (sops `kms/keysource.go`), on @aws-sdk/client-kms.
 *
 * Wrap is Encrypt(KeyId = arn, Plaintext = the raw secret, EncryptionContext = `context`),
 * enc the standard base64 of the CiphertextBlob; unwrap is Decrypt with the same KeyId and
 * context. The region comes from the ARN (sops does the same); the endpoint from
 * `deps.awsKms.endpoint`, else AWS_ENDPOINT_URL_KMS, else AWS_ENDPOINT_URL of deps.env. `aws_profile`
 * selects a shared-config profile (the SDK's `profile` option); `role` is assumed through STS
 * with the session name sops uses, `sops@<sanitised hostname>`.
 *
 * Error classes: AccessDenied and friends -> KEY_ACCESS_DENIED; NotFound / InvalidArn ->
 * KEY_NOT_FOUND; InvalidCiphertext (wrong encryption context or damaged enc) and
 * IncorrectKey (enc made by another key) -> BAD_INPUT, because the entry does not fit the
 * key and no credential or retry can change that; throttling, 5xx and connection failures
 * -> KEY_UNAVAILABLE, retried (src/retry.ts). An ARN that does not match sops's ARN pattern is
 * refused when the key is configured (BAD_INPUT), as the interface asks of fromMetadata.
 */

import type { DecryptCommandOutput, KMSClient } from "@aws-sdk/client-kms";
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyFieldValue,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError } from "../../src/errors.ts";
import { retryCall, retryPolicy } from "../../src/retry.ts";
import {
  type AwsKmsDeps,
  checkAnsweredKey,
  isNoCredentials,
  type KmsSettings,
  loadKmsSdk,
  mapKmsError,
  newClient,
  regionOf,
} from "./aws-kms-client.ts";
import { checkCreatedAt, decodeStdBase64, formatCreatedAt, stringField } from "./entry-fields.ts";
import {
  type ConfigItem,
  itemString,
  type MasterKeyType,
  newEntry,
  type ShorthandContext,
} from "./key-type.ts";

/** sops ToString: arn[+role], then `|k:v,…` (sorted) when there is a context or profile, then `|profile`. */
function kmsIdentity(entry: KeyEntry): string {
  const role = entryString(entry, "role");
  const arn = entryString(entry, "arn");
  const arnRole = role ? `${arn}+${role}` : arn;
  const ctx = entry.fields.get("context");
  const context =
    typeof ctx === "object"
      ? Object.keys(ctx)
          .sort()
          .map((k) => `${k}:${ctx[k]}`)
          .join(",")
      : "";
  const profile = entryString(entry, "aws_profile");
  if (profile) return `${arnRole}|${context}|${profile}`;
  return context ? `${arnRole}|${context}` : arnRole;
}

/** sops `kms` entries (stores.go kmskey): `role` and `context` are `omitempty`. */
export const AWS_KMS_FORMAT: KeyKindFormat = {
  kind: "kms",
  fields: ["arn", "aws_profile", "context", "created_at", "enc", "role"],
  omitEmpty: ["role", "context"],
  mapFields: ["context"],
  alwaysInGroup: false,
  readRank: 0,
  decryptionRank: 2,
  identity: kmsIdentity,
  // The CiphertextBlob in standard base64 (unwrap checks the length: decodeStdBase64).
  encSyntax: /^[A-Za-z0-9+/]+={0,2}$/,
  passphrase: { scheme: "kms", provider: "aws", wrapped: "base64" },
};

/**
 * The one `ARN+ROLE_ARN` split (kms.NewMasterKeyFromArn): spaces removed, split at `+arn:`
 * (a role ARN always starts `arn:`; a key ARN path may hold `+`).
 */
export function splitArnRole(text: string): { arn: string; role: string } {
  const arn = text.replaceAll(" ", "");
  const at = arn.indexOf("+arn:");
  return at > 0 ? { arn: arn.slice(0, at), role: arn.slice(at + 1) } : { arn, role: "" };
}

function kmsEntry(
  arn: string,
  role: string,
  context: Readonly<Record<string, string>> | null,
  awsProfile: string,
): KeyEntry {
  if (arn === "") throw new BootsealError("BAD_INPUT", "empty kms arn");
  const fields: [string, KeyFieldValue][] = [["arn", arn]];
  if (role) fields.push(["role", role]);
  if (context && Object.keys(context).length > 0) fields.push(["context", { ...context }]);
  fields.push(["aws_profile", awsProfile]);
  return newEntry("kms", fields);
}

function kmsEntryFromText(text: string, context: ShorthandContext): KeyEntry {
  const { arn, role } = splitArnRole(text);
  return kmsEntry(arn, role, context.kmsContext, context.awsProfile);
}

function kmsEntryFromConfig(item: ConfigItem): KeyEntry[] {
  const what = "kms key";
  const ctx = typeof item === "string" ? undefined : item.get("context");
  if (typeof ctx === "string") throw new BootsealError("BAD_INPUT", "kms context must be a mapping");
  return [
    kmsEntry(
      itemString(item, "arn", what),
      itemString(item, "role", what),
      ctx ?? null,
      itemString(item, "aws_profile", what),
    ),
  ];
}

/** The identity of a configured key: AWS_KMS_FORMAT.identity of its entry. */
export function kmsKeyId(s: KmsSettings): string {
  const fields: [string, KeyFieldValue][] = [
    ["arn", s.arn],
    ["role", s.role],
    ["aws_profile", s.profile],
  ];
  if (s.context) fields.push(["context", s.context]);
  return kmsIdentity(newEntry("kms", fields));
}

function kmsKey(s: KmsSettings, deps: AwsKmsDeps): MasterKey {
  regionOf(s.arn); // fail at configuration, not on first use
  const id = kmsKeyId(s);
  const policy = retryPolicy(deps.awsKms?.retry);
  const context = s.context && Object.keys(s.context).length > 0 ? { ...s.context } : undefined;
  let client: Promise<KMSClient> | undefined;
  const kms = () => {
    client ??= newClient(s, deps).catch((err: unknown) => {
      client = undefined;
      throw err;
    });
    return client;
  };

  async function call<T>(
    op: string,
    signal: AbortSignal | undefined,
    run: (abortSignal: AbortSignal) => Promise<T>,
  ) {
    const what = `kms: ${op} with ${id}`;
    return retryCall(policy, what, "KEY_UNAVAILABLE", signal, async (attemptSignal) => {
      try {
        return await run(attemptSignal);
      } catch (err) {
        throw mapKmsError(err, id, op);
      }
    });
  }

  return {
    kind: "kms",
    id,

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const { EncryptCommand } = await loadKmsSdk();
      const out = await call("encrypt", options?.signal, async (abortSignal) =>
        (await kms()).send(
          new EncryptCommand({
            KeyId: s.arn,
            Plaintext: secret,
            ...(context ? { EncryptionContext: context } : {}),
          }),
          { abortSignal },
        ),
      );
      checkAnsweredKey(s, out.KeyId, id);
      if (!out.CiphertextBlob?.length) throw new BootsealError("BAD_INPUT", `kms: ${id}: empty ciphertext`);
      return Buffer.from(out.CiphertextBlob).toString("base64");
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      const blob = decodeStdBase64(enc, `kms: ${id}`);
      const { DecryptCommand } = await loadKmsSdk();
      let out: DecryptCommandOutput;
      try {
        out = await call("decrypt", options?.signal, async (abortSignal) =>
          (await kms()).send(
            new DecryptCommand({
              KeyId: s.arn,
              CiphertextBlob: blob,
              ...(context ? { EncryptionContext: context } : {}),
            }),
            { abortSignal },
          ),
        );
      } catch (err) {
        // No credentials at all on this machine: not our key to open here; try the next one.
        if (err instanceof BootsealError && isNoCredentials(err)) return null;
        throw err;
      }
      const plaintext = out.Plaintext;
      if (!plaintext?.length) throw new BootsealError("BAD_INPUT", `kms: ${id}: empty plaintext`);
      try {
        checkAnsweredKey(s, out.KeyId, id);
      } catch (err) {
        plaintext.fill(0);
        throw err;
      }
      return plaintext;
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      // sops order (ToMap + stores.go); the metadata writer sorts them.
      const fields = new Map<string, KeyFieldValue>([["arn", s.arn]]);
      if (s.role) fields.set("role", s.role);
      if (context) fields.set("context", { ...context });
      fields.set("created_at", formatCreatedAt(createdAt));
      fields.set("enc", enc);
      fields.set("aws_profile", s.profile);
      return { kind: "kms", enc, fields };
    },
  };
}

/** kms.NewMasterKeyFromArn, for `--kms` and SOPS_KMS_ARN. */
function settingsFromArn(text: string): KmsSettings {
  return { ...splitArnRole(text), context: undefined, profile: "" };
}

export const awsKmsKeyType: MasterKeyType<"kms", AwsKmsDeps> = {
  kind: "kms",
  format: AWS_KMS_FORMAT,
  flag: {
    flag: "kms",
    short: "k",
    env: "SOPS_KMS_ARN",
    help: "comma separated list of KMS ARNs",
    example:
      "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab+arn:aws:iam::123456789012:role/sops",
    rank: 0,
    takesContext: true,
  },
  config: { groupKey: "kms", groupItem: "mapping", shorthandKey: "kms" },

  entryFromText: kmsEntryFromText,
  entriesFromConfig: kmsEntryFromConfig,

  fromMetadata(entry: KeyEntry, deps: AwsKmsDeps): MasterKey {
    const arn = stringField(entry.fields, "arn", "kms entry");
    if (arn === "") throw new BootsealError("BAD_INPUT", "kms entry without arn");
    checkCreatedAt(entry.fields.get("created_at"), `kms entry ${arn}`);
    const ctx = entry.fields.get("context");
    if (ctx !== undefined && typeof ctx !== "object") {
      throw new BootsealError("BAD_INPUT", `kms entry ${arn}: context is not a mapping`);
    }
    return kmsKey(
      {
        arn,
        role: stringField(entry.fields, "role", `kms entry ${arn}`),
        context: ctx,
        profile: stringField(entry.fields, "aws_profile", `kms entry ${arn}`),
      },
      deps,
    );
  },

  fromUserInput(text: string, deps: AwsKmsDeps): MasterKey[] {
    return text
      .split(",")
      .filter((part) => part.trim() !== "")
      .map((part) => kmsKey(settingsFromArn(part), deps));
  },
};

export interface GeneratedDataKey {
  /** The 32-byte key: the caller owns it and zeroes it after use. */
  readonly plaintext: Uint8Array;
  /** Standard base64 of the CiphertextBlob, as in a `kms` entry. */
  readonly enc: string;
}

/**
 * GenerateDataKey (AES_256) under `arn` with an optional encryption context, for the
 * EncryptedConfig envelope format: KMS makes the key, so it never leaves this process unwrapped
 * except to the caller.
 */
export async function generateDataKey(
  arn: string,
  context: Readonly<Record<string, string>> | undefined,
  deps: AwsKmsDeps = {},
  options: CallOptions = {},
): Promise<GeneratedDataKey> {
  const s = { ...settingsFromArn(arn), context };
  const id = kmsKeyId(s);
  const policy = retryPolicy(deps.awsKms?.retry);
  const { GenerateDataKeyCommand } = await loadKmsSdk();
  const client = await newClient(s, deps);
  try {
    const what = `kms: generate data key with ${id}`;
    const out = await retryCall(policy, what, "KEY_UNAVAILABLE", options.signal, async (attemptSignal) => {
      try {
        return await client.send(
          new GenerateDataKeyCommand({
            KeyId: s.arn,
            KeySpec: "AES_256",
            ...(context && Object.keys(context).length > 0 ? { EncryptionContext: { ...context } } : {}),
          }),
          { abortSignal: attemptSignal },
        );
      } catch (err) {
        throw mapKmsError(err, id, "generate data key");
      }
    });
    const plaintext = out.Plaintext;
    try {
      if (plaintext?.length !== 32 || !out.CiphertextBlob?.length) {
        throw new BootsealError("BAD_INPUT", `kms: ${id}: GenerateDataKey gave no 32-byte key`);
      }
      checkAnsweredKey(s, out.KeyId, id);
    } catch (err) {
      plaintext?.fill(0);
      throw err;
    }
    return { plaintext, enc: Buffer.from(out.CiphertextBlob).toString("base64") };
  } finally {
    client.destroy();
  }
}
