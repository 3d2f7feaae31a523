/**
 * HuaweiCloud KMS master keys (sops 3.13 `hckms/keysource.go`), over the KMS REST API with
 * the SDK's request signing (SDK-HMAC-SHA256, ./hckms-signer.ts); no HuaweiCloud SDK for Node.
 *
 * A key is `region:key-uuid`. Wrap is `POST /v1.0/{project_id}/kms/encrypt-data` with
 * `plain_text` = the standard base64 of the data key (as sops: KMS takes text) and
 * SYMMETRIC_DEFAULT; enc is the answer's `cipher_text`, verbatim. Unwrap is `decrypt-data`
 * with that text and the key uuid; the answer's `plain_text` is base64-decoded.
 *
 * Settings, as the HuaweiCloud Go SDK reads them for sops:
 * - endpoint: HUAWEICLOUD_SDK_REGION_KMS_<REGION> (the region upper-cased, `-` as `_`; the
 *   first of a comma list), else the SDK's table of KMS regions; another region is refused.
 * - credentials: HUAWEICLOUD_SDK_AK, HUAWEICLOUD_SDK_SK, HUAWEICLOUD_SDK_PROJECT_ID, and
 *   HUAWEICLOUD_SDK_SECURITY_TOKEN for temporary keys. Not read here (docs/compatibility.md):
 *   ~/.huaweicloud/credentials and regions.yaml, the ECS metadata service, the IAM look-up of
 *   a missing project id.
 */
import type { CallOptions } from "../../src/call-options.ts";
import {
  entryString,
  type KeyEntry,
  type KeyKindFormat,
  type MasterKey,
} from "../../src/envelope/sops/master-key.ts";
import { BootsealError, type ErrorCode } from "../../src/errors.ts";
import { type RetryPolicy, retryCall, retryPolicy } from "../../src/retry.ts";
import { checkCreatedAt, decodeStdBase64, entryWithCreatedAt, stringField } from "./entry-fields.ts";
import { signHuaweiRequest } from "./hckms-signer.ts";
import { type BaseDeps, itemString, type MasterKeyType, newEntry } from "./key-type.ts";

// The global, not `node:process`: importing that module as ESM evaluates its lazy getters.
const processEnv = process.env;
type Env = Readonly<Record<string, string | undefined>>;

export interface HckmsDeps extends BaseDeps {
  readonly hckms?: { readonly retry?: Partial<RetryPolicy> };
}

/** sops `hckms` entries (stores.go hckmskey). */
export const HCKMS_FORMAT: KeyKindFormat = {
  kind: "hckms",
  fields: ["key_id", "created_at", "enc"],
  omitEmpty: [],
  mapFields: [],
  alwaysInGroup: false,
  readRank: 2,
  decryptionRank: 4,
  identity: (entry) => entryString(entry, "key_id"),
  // cipher_text is the service's own text: carried as it is.
  passphrase: { scheme: "hckms", provider: "huaweicloud", wrapped: "text" },
};

/** The KMS regions of huaweicloud-sdk-go-v3 v0.1.207 (services/kms/v2/region), sops 3.13's SDK. */
const KMS_REGIONS = new Set(
  (
    "cn-north-4 cn-north-1 cn-north-2 cn-east-2 cn-east-3 cn-south-1 cn-south-2 af-south-1 " +
    "cn-southwest-2 ap-southeast-2 ap-southeast-1 ap-southeast-3 la-south-2 sa-brazil-1 na-mexico-1 " +
    "la-north-2 cn-north-9 ap-southeast-4 tr-west-1 ae-ad-1 my-kualalumpur-1 ru-moscow-1 cn-east-5 " +
    "cn-east-4 me-east-1 ap-southeast-5 cn-south-4 cn-north-12 cn-north-11 af-north-1 cn-southwest-3 eu-west-101"
  ).split(" "),
);

/** sops parseKeyID: `region:key-uuid`, split at the first colon, both parts trimmed and non-empty. */
export function parseHckmsKeyId(keyId: string): { region: string; keyUuid: string } {
  const trimmed = keyId.trim();
  const at = trimmed.indexOf(":");
  if (at < 0) {
    throw new BootsealError(
      "BAD_INPUT",
      `invalid key ID format: expected 'region:key-uuid', got ${JSON.stringify(trimmed)}`,
    );
  }
  const region = trimmed.slice(0, at).trim();
  const keyUuid = trimmed.slice(at + 1).trim();
  if (region === "")
    throw new BootsealError("BAD_INPUT", `region cannot be empty in key ID: ${JSON.stringify(trimmed)}`);
  if (keyUuid === "") {
    throw new BootsealError("BAD_INPUT", `key UUID cannot be empty in key ID: ${JSON.stringify(trimmed)}`);
  }
  return { region, keyUuid };
}

/** The SDK's region chain for service KMS: the environment first, then its table. */
export function hckmsEndpoint(region: string, env: Env): string {
  const fromEnv = env[`HUAWEICLOUD_SDK_REGION_KMS_${region.toUpperCase().replaceAll("-", "_")}`];
  const first = fromEnv?.split(",")[0]?.trim();
  if (first) return first.replace(/\/+$/, "");
  if (!KMS_REGIONS.has(region)) {
    throw new BootsealError("BAD_INPUT", `hckms: invalid region ${JSON.stringify(region)}: not a KMS region`);
  }
  return `https://kms.${region}.myhuaweicloud.${region === "eu-west-101" ? "eu" : "com"}`;
}

interface Credentials {
  readonly ak: string;
  readonly sk: string;
  readonly projectId: string;
  readonly securityToken: string;
}

/** null: no access key here (a decrypt tries the next key). */
function credentialsFrom(env: Env, id: string): Credentials | null {
  const ak = env.HUAWEICLOUD_SDK_AK ?? "";
  const sk = env.HUAWEICLOUD_SDK_SK ?? "";
  if (ak === "" || sk === "") return null;
  const projectId = env.HUAWEICLOUD_SDK_PROJECT_ID ?? "";
  if (projectId === "") {
    throw new BootsealError(
      "USAGE",
      `hckms: ${id}: set HUAWEICLOUD_SDK_PROJECT_ID (no IAM project look-up here)`,
    );
  }
  return { ak, sk, projectId, securityToken: env.HUAWEICLOUD_SDK_SECURITY_TOKEN ?? "" };
}

function codeForStatus(status: number): ErrorCode {
  if (status === 401 || status === 403) return "KEY_ACCESS_DENIED";
  if (status === 404) return "KEY_NOT_FOUND";
  if (status === 429 || status >= 500) return "KEY_UNAVAILABLE";
  return "BAD_INPUT";
}

/** `error_code: error_msg` of an answer, top level or under `error` (both shapes occur). */
function errorDetail(text: string): string {
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    const e = (typeof body.error === "object" && body.error !== null ? body.error : body) as Record<
      string,
      unknown
    >;
    const parts = [e.error_code, e.error_msg].filter((p): p is string => typeof p === "string");
    return parts.join(": ").slice(0, 200);
  } catch {
    return "";
  }
}

function hckmsKey(keyId: string, deps: HckmsDeps): MasterKey {
  const { region, keyUuid } = parseHckmsKeyId(keyId);
  const env = deps.env ?? processEnv;
  const policy = retryPolicy(deps.hckms?.retry);

  async function post(
    op: "encrypt-data" | "decrypt-data",
    creds: Credentials,
    body: Record<string, string>,
    signal: AbortSignal | undefined,
  ): Promise<Record<string, unknown>> {
    const endpoint = hckmsEndpoint(region, env);
    const path = `/v1.0/${creds.projectId}/kms/${op}`;
    const payload = JSON.stringify(body);
    const what = `hckms: ${op} with ${keyId}`;
    return retryCall(policy, what, "KEY_UNAVAILABLE", signal, async (attemptSignal) => {
      const headers: Record<string, string> = {
        Host: new URL(endpoint).host,
        "X-Project-Id": creds.projectId,
        ...(creds.securityToken ? { "X-Security-Token": creds.securityToken } : {}),
      };
      const signed = signHuaweiRequest({ method: "POST", path, headers, body: payload }, creds.ak, creds.sk);
      let res: Response;
      try {
        // Host is signed but sent by fetch itself, from the same URL.
        const { Host: _host, ...sent } = signed;
        res = await fetch(`${endpoint}${path}`, {
          method: "POST",
          headers: { ...sent, "Content-Type": "application/json;charset=UTF-8" },
          body: payload,
          signal: attemptSignal,
        });
      } catch (cause) {
        signal?.throwIfAborted();
        const why = (cause as { cause?: { code?: string } }).cause?.code ?? (cause as Error).name;
        throw new BootsealError("KEY_UNAVAILABLE", `${what}: unreachable (${why})`, { cause });
      }
      const text = await res.text();
      if (!res.ok) {
        const detail = errorDetail(text);
        throw new BootsealError(
          codeForStatus(res.status),
          `${what}: HTTP ${res.status}${detail ? ` (${detail})` : ""}`,
        );
      }
      try {
        const answer = JSON.parse(text) as unknown;
        if (typeof answer === "object" && answer !== null) return answer as Record<string, unknown>;
      } catch {}
      throw new BootsealError("BAD_INPUT", `${what}: the answer is not JSON`);
    });
  }

  return {
    kind: "hckms",
    id: keyId,

    async wrap(secret: Uint8Array, options?: CallOptions): Promise<string> {
      const creds = credentialsFrom(env, keyId);
      if (creds === null) {
        throw new BootsealError("KEY_ACCESS_DENIED", `hckms: no HuaweiCloud credentials for ${keyId}`);
      }
      const plainText = Buffer.from(secret.buffer, secret.byteOffset, secret.byteLength).toString("base64");
      const answer = await post(
        "encrypt-data",
        creds,
        { key_id: keyUuid, plain_text: plainText, encryption_algorithm: "SYMMETRIC_DEFAULT" },
        options?.signal,
      );
      if (typeof answer.cipher_text !== "string" || answer.cipher_text === "") {
        throw new BootsealError("BAD_INPUT", "encryption response missing ciphertext");
      }
      return answer.cipher_text;
    },

    async unwrap(enc: string, options?: CallOptions): Promise<Uint8Array | null> {
      const creds = credentialsFrom(env, keyId);
      if (creds === null) return null;
      const answer = await post(
        "decrypt-data",
        creds,
        { cipher_text: enc, encryption_algorithm: "SYMMETRIC_DEFAULT", key_id: keyUuid },
        options?.signal,
      );
      if (typeof answer.plain_text !== "string") {
        throw new BootsealError("BAD_INPUT", "decryption response missing plaintext");
      }
      return decodeStdBase64(answer.plain_text, `hckms: decrypted data key of ${keyId}`);
    },

    toMetadata(enc: string, createdAt: Date): KeyEntry {
      return entryWithCreatedAt("hckms", [["key_id", keyId]], enc, createdAt);
    },
  };
}

/** hckms.NewMasterKey: the id as given, checked by parseKeyID. */
function hckmsEntry(text: string): KeyEntry {
  parseHckmsKeyId(text);
  return newEntry("hckms", [["key_id", text]]);
}

export const hckmsKeyType: MasterKeyType<"hckms", HckmsDeps> = {
  kind: "hckms",
  format: HCKMS_FORMAT,
  flag: {
    flag: "hckms",
    env: "SOPS_HUAWEICLOUD_KMS_IDS",
    help: "comma separated list of HuaweiCloud KMS key IDs (format: region:key-uuid)",
    example: "tr-west-1:0f4d1c5e-8a6b-4c2d-9e3f-1a2b3c4d5e6f",
    rank: 2,
  },
  config: { groupKey: "hckms", groupItem: "mapping", shorthandKey: "hckms" },

  entryFromText: (text) => hckmsEntry(text.trim()),

  entriesFromConfig(item) {
    return [hckmsEntry(itemString(item, "key_id", "hckms key"))];
  },

  fromMetadata(entry: KeyEntry, deps: HckmsDeps): MasterKey {
    const keyId = stringField(entry.fields, "key_id", "hckms entry");
    checkCreatedAt(entry.fields.get("created_at"), `hckms entry ${keyId}`);
    return hckmsKey(keyId, deps);
  },

  fromUserInput(text: string, deps: HckmsDeps): MasterKey[] {
    return text
      .split(",")
      .map((part) => part.trim())
      .filter((part) => part !== "")
      .map((part) => hckmsKey(part, deps));
  },
};
