/**
 * FAKE HuaweiCloud KMS (the REST API of KMS v1.0/v2 as huaweicloud-sdk-go-v3 calls it),
 * hand-written because no HuaweiCloud KMS emulator exists to install. It speaks the real wire
 * protocol: JSON over HTTP, every request signed SDK-HMAC-SHA256 with an access key (checked
 * here, independently of bootseal's signer: the real sops's SDK and bootseal must both pass),
 * X-Project-Id equal to the path's project. The real sops reaches it through the SDK's own
 * endpoint setting, HUAWEICLOUD_SDK_REGION_KMS_<REGION>=http://127.0.0.1:<port>.
 *
 * Implemented: POST /v1.0/{project_id}/kms/create-key ({key_alias} -> {key_info:{key_id}}),
 * encrypt-data ({key_id, plain_text, encryption_algorithm} -> {key_id, cipher_text}),
 * decrypt-data ({cipher_text, key_id?} -> {key_id, plain_text, plain_text_base64}).
 * plain_text is text of 1-4096 bytes, kept as it is (sops sends base64). A cipher_text is
 * base64 of: key id (36 ASCII bytes) || IV (12) || AES-256-GCM body || tag (16); opaque to
 * clients as the real one is. Errors are `{"error":{"error_code","error_msg"}}`: a bad
 * signature 401 APIGW.0301, an unknown key 404 KMS.0207, a damaged ciphertext or a key_id
 * that does not match it 400 KMS.0205 (the codes are this fake's choice, after the
 * service's documented style). Omitted: key states, grants, aliases as ids, encryption
 * context, asymmetric keys, data-key calls, IAM tokens (only AK/SK signing).
 *
 *   node test/fakes/hckms-fake.ts [--listen 127.0.0.1:0]
 *
 * Credentials accepted: BOOTSEAL_FAKE_HCKMS_AK / BOOTSEAL_FAKE_HCKMS_SK (default
 * fake-ak / fake-sk). Prints `listening on http://HOST:PORT` when ready.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  randomBytes,
  randomUUID,
} from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { argv, env } from "node:process";

const KEY_ID_LEN = 36;
const IV_LEN = 12;
const TAG_LEN = 16;
const MAX_SKEW_MS = 15 * 60_000;

export interface HckmsFakeOptions {
  readonly ak?: string;
  readonly sk?: string;
}

class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The server side of SDK-HMAC-SHA256: rebuild the canonical request from what arrived. */
function checkSignature(req: IncomingMessage, body: Buffer, ak: string, sk: string): void {
  const auth = req.headers.authorization ?? "";
  const m = /^SDK-HMAC-SHA256 Access=([^,]+), SignedHeaders=([^,]+), Signature=([0-9a-f]+)$/.exec(auth);
  if (!m)
    throw new ApiError(
      401,
      "APIGW.0301",
      "Incorrect IAM authentication information: no SDK-HMAC-SHA256 Authorization",
    );
  const [, access, signedHeaders, signature] = m as unknown as [string, string, string, string];
  if (access !== ak)
    throw new ApiError(401, "APIGW.0301", "Incorrect IAM authentication information: unknown access key");
  const date = String(req.headers["x-sdk-date"] ?? "");
  const dm = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(date);
  if (!dm) throw new ApiError(401, "APIGW.0303", "Incorrect app authentication information: X-Sdk-Date");
  const when = Date.UTC(+dm[1]!, +dm[2]! - 1, +dm[3]!, +dm[4]!, +dm[5]!, +dm[6]!);
  if (Math.abs(Date.now() - when) > MAX_SKEW_MS) {
    throw new ApiError(401, "APIGW.0303", "Incorrect app authentication information: request expired");
  }
  const names = signedHeaders.split(";");
  if (!names.includes("x-sdk-date")) throw new ApiError(401, "APIGW.0301", "X-Sdk-Date is not signed");
  const url = new URL(req.url ?? "/", "http://fake");
  // The SDK escapes each path segment RFC 3986 style and ends the path with '/'.
  let uri = url.pathname
    .split("/")
    .map((s) =>
      encodeURIComponent(decodeURIComponent(s)).replace(
        /[!'()*]/g,
        (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
      ),
    )
    .join("/");
  if (!uri.endsWith("/")) uri += "/";
  const query = [...url.searchParams]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join("&");
  const headerLines = names.map((n) => {
    const v = req.headers[n];
    return `${n}:${(Array.isArray(v) ? v.join(",") : (v ?? "")).trim()}`;
  });
  const canonical = [
    req.method,
    uri,
    query,
    `${headerLines.join("\n")}\n`,
    signedHeaders,
    createHash("sha256").update(body).digest("hex"),
  ].join("\n");
  const toSign = `SDK-HMAC-SHA256\n${date}\n${createHash("sha256").update(canonical).digest("hex")}`;
  const want = createHmac("sha256", sk).update(toSign).digest("hex");
  if (want !== signature) {
    throw new ApiError(
      401,
      "APIGW.0301",
      "Incorrect IAM authentication information: verify aksk signature fail",
    );
  }
}

function field(body: Record<string, unknown>, name: string, required = true): string {
  const v = body[name];
  if (v === undefined && !required) return "";
  if (typeof v !== "string" || v === "") throw new ApiError(400, "KMS.0201", `Invalid request: ${name}`);
  return v;
}

/** Starts the fake; resolves when it listens. */
export async function startHckmsFake(
  host = "127.0.0.1",
  port = 0,
  options: HckmsFakeOptions = {},
): Promise<{ server: Server; url: string; createKey: () => string }> {
  const ak = options.ak ?? env.BOOTSEAL_FAKE_HCKMS_AK ?? "fake-ak";
  const sk = options.sk ?? env.BOOTSEAL_FAKE_HCKMS_SK ?? "fake-sk";
  const keys = new Map<string, Buffer>();
  /** A new key (also what create-key does); its uuid. */
  const createKey = (): string => {
    const keyId = randomUUID();
    keys.set(keyId, randomBytes(32));
    return keyId;
  };

  function operate(project: string, op: string, body: Record<string, unknown>): Record<string, unknown> {
    if (op === "create-key") {
      field(body, "key_alias");
      return { key_info: { key_id: createKey(), domain_id: project } };
    }
    if (op === "encrypt-data") {
      const keyId = field(body, "key_id");
      const plain = Buffer.from(field(body, "plain_text"), "utf8");
      if (plain.length > 4096) throw new ApiError(400, "KMS.0201", "Invalid request: plain_text too long");
      const key = keys.get(keyId);
      if (!key) throw new ApiError(404, "KMS.0207", `Key ${keyId} does not exist`);
      const iv = randomBytes(IV_LEN);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      const sealed = Buffer.concat([
        Buffer.from(keyId, "ascii"),
        iv,
        cipher.update(plain),
        cipher.final(),
        cipher.getAuthTag(),
      ]);
      return { key_id: keyId, cipher_text: sealed.toString("base64") };
    }
    if (op === "decrypt-data") {
      const blob = Buffer.from(field(body, "cipher_text"), "base64");
      if (blob.length < KEY_ID_LEN + IV_LEN + TAG_LEN + 1)
        throw new ApiError(400, "KMS.0205", "Invalid cipher_text");
      const keyId = blob.subarray(0, KEY_ID_LEN).toString("ascii");
      const given = field(body, "key_id", false);
      if (given !== "" && given !== keyId)
        throw new ApiError(400, "KMS.0205", "The cipher_text does not belong to key_id");
      const key = keys.get(keyId);
      if (!key) throw new ApiError(404, "KMS.0207", `Key ${keyId} does not exist`);
      const iv = blob.subarray(KEY_ID_LEN, KEY_ID_LEN + IV_LEN);
      const decipher = createDecipheriv("aes-256-gcm", key, iv);
      decipher.setAuthTag(blob.subarray(blob.length - TAG_LEN));
      let plain: Buffer;
      try {
        plain = Buffer.concat([
          decipher.update(blob.subarray(KEY_ID_LEN + IV_LEN, blob.length - TAG_LEN)),
          decipher.final(),
        ]);
      } catch {
        throw new ApiError(400, "KMS.0205", "Invalid cipher_text");
      }
      return {
        key_id: keyId,
        plain_text: plain.toString("utf8"),
        plain_text_base64: plain.toString("base64"),
      };
    }
    throw new ApiError(
      404,
      "APIGW.0101",
      "The API does not exist or has not been published in the environment",
    );
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    let status = 200;
    let answer: Record<string, unknown>;
    try {
      const m = /^\/v1\.0\/([^/]+)\/kms\/([a-z-]+)$/.exec(new URL(req.url ?? "/", "http://fake").pathname);
      if (req.method !== "POST" || !m) throw new ApiError(404, "APIGW.0101", "The API does not exist");
      checkSignature(req, raw, ak, sk);
      const project = m[1] as string;
      if (req.headers["x-project-id"] !== project)
        throw new ApiError(401, "APIGW.0301", "X-Project-Id does not match the path");
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw.toString("utf8")) as Record<string, unknown>;
      } catch {
        throw new ApiError(400, "KMS.0201", "Invalid request: body is not JSON");
      }
      answer = operate(project, m[2] as string, body);
    } catch (err) {
      const e = err instanceof ApiError ? err : new ApiError(500, "KMS.0001", "internal error");
      status = e.status;
      answer = { error: { error_code: e.code, error_msg: e.message } };
    }
    const text = JSON.stringify(answer);
    res.writeHead(status, {
      "Content-Type": "application/json;charset=UTF-8",
      "X-Request-Id": randomUUID().replaceAll("-", ""),
    });
    res.end(text);
  }

  const server = createServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const { port: bound } = server.address() as AddressInfo;
  return { server, url: `http://${host}:${bound}`, createKey };
}

if (import.meta.main) {
  const at = argv.indexOf("--listen");
  const listen = at > 0 ? (argv[at + 1] ?? "127.0.0.1:0") : "127.0.0.1:0";
  const colon = listen.lastIndexOf(":");
  const { url } = await startHckmsFake(listen.slice(0, colon), Number(listen.slice(colon + 1)));
  console.log(`listening on ${url}`);
}
