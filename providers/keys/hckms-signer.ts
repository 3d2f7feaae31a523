/**
 * HuaweiCloud API request signing, SDK-HMAC-SHA256 (huaweicloud-sdk-go-v3 core/auth/signer):
 * the canonical request is method, the path with every segment escaped and a final `/`, the
 * query (none here), the lower-cased headers sorted (all given but Content-Type), their names,
 * and the body's SHA-256; the signature is the HMAC-SHA256 of "SDK-HMAC-SHA256\n<X-Sdk-Date>\n
 * <hex SHA-256 of the canonical request>" under the secret key.
 */
import { createHash, createHmac } from "node:crypto";

export interface HuaweiRequest {
  readonly method: string;
  readonly path: string;
  /** Headers to sign (Host, X-Project-Id, …); Content-Type is never signed. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
}

const ALGORITHM = "SDK-HMAC-SHA256";

/** The SDK's escape: everything but A-Z a-z 0-9 _ - ~ . as %XX (upper-case hex). */
function escapeSegment(segment: string): string {
  return Array.from(Buffer.from(segment, "utf8"), (b) =>
    /[A-Za-z0-9_\-~.]/.test(String.fromCharCode(b))
      ? String.fromCharCode(b)
      : `%${b.toString(16).toUpperCase().padStart(2, "0")}`,
  ).join("");
}

/** 20060102T150405Z */
function sdkDate(now: Date): string {
  return now
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}Z$/, "Z");
}

/** The request's headers plus X-Sdk-Date and Authorization. */
export function signHuaweiRequest(
  req: HuaweiRequest,
  ak: string,
  sk: string,
  now: Date = new Date(),
): Record<string, string> {
  const date = sdkDate(now);
  const headers: Record<string, string> = { ...req.headers, "X-Sdk-Date": date };
  const lower = new Map(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v.trim()]));
  const names = [...lower.keys()].filter((k) => !k.startsWith("content-type") && !k.includes("_")).sort();
  let uri = req.path.split("/").map(escapeSegment).join("/");
  if (!uri.endsWith("/")) uri += "/";
  const canonical = [
    req.method,
    uri,
    "",
    `${names.map((k) => `${k}:${lower.get(k)}`).join("\n")}\n`,
    names.join(";"),
    createHash("sha256").update(req.body).digest("hex"),
  ].join("\n");
  const toSign = `${ALGORITHM}\n${date}\n${createHash("sha256").update(canonical).digest("hex")}`;
  const signature = createHmac("sha256", sk).update(toSign).digest("hex");
  headers.Authorization = `${ALGORITHM} Access=${ak}, SignedHeaders=${names.join(";")}, Signature=${signature}`;
  return headers;
}
