/**
 * IAM roles and assumed-role credentials on moto (the `moto` peer also serves IAM and STS at
 * its one endpoint): moto answers GetCallerIdentity with the ARN of the calling access key,
 * so credentials from AssumeRole make a caller `arn:aws:sts::123456789012:assumed-role/R/S`.
 * Requests are signed with the SDK's signer (moto reads the service from the scope). The
 * `moto` peer takes any key; `moto-sts` checks signatures and policies, so it is called with
 * the admin key its set-up made (scripts/peers/moto-sts.sh).
 */
import { createHash, createHmac } from "node:crypto";
import { SignatureV4 } from "@smithy/signature-v4";
import type { AwsCredentialIdentity, Checksum, SourceData } from "@smithy/types";
import { peer } from "./peers.ts";

/** moto's default account. */
export const MOTO_ACCOUNT = "123456789012";
export const MOTO_REGION = "us-east-1";

export function motoEndpoint(): string {
  return peer("KMS_MOTO_ENDPOINT");
}

/** A moto to call, and the key to sign with. */
export interface Moto {
  readonly endpoint: string;
  readonly credentials: AwsCredentialIdentity;
  /** Who may assume the roles made here besides EC2 (a checking moto applies trust policies). */
  readonly trusted?: string;
}

/** The `moto` peer: any key is accepted. */
export function anyKeyMoto(): Moto {
  return {
    endpoint: motoEndpoint(),
    credentials: { accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "test-admin-secret" },
  };
}

/** The `moto-sts` peer (signatures checked), with its admin user's key. */
export function checkingMoto(): Moto {
  return {
    endpoint: peer("STS_MOTO_AUTH_ENDPOINT"),
    credentials: {
      accessKeyId: peer("STS_MOTO_AUTH_ACCESS_KEY"),
      secretAccessKey: peer("STS_MOTO_AUTH_SECRET_KEY"),
    },
    trusted: `arn:aws:iam::${MOTO_ACCOUNT}:user/bootseal-admin`,
  };
}

class Sha256 implements Checksum {
  readonly #secret: Buffer | undefined;
  #parts: Buffer[] = [];
  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : Buffer.from(secret as Uint8Array);
  }
  update(data: Uint8Array): void {
    this.#parts.push(Buffer.from(data));
  }
  async digest(): Promise<Uint8Array> {
    const h = this.#secret ? createHmac("sha256", this.#secret) : createHash("sha256");
    return new Uint8Array(h.update(Buffer.concat(this.#parts)).digest());
  }
  reset(): void {
    this.#parts = [];
  }
}

/** One signed query-protocol call; the answer's status and body. */
export async function motoCall(
  moto: Moto,
  service: "iam" | "sts",
  params: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const url = new URL(moto.endpoint);
  const body = new URLSearchParams(params).toString();
  const signer = new SignatureV4({
    credentials: moto.credentials,
    region: MOTO_REGION,
    service,
    sha256: Sha256,
  });
  const signed = await signer.sign({
    method: "POST",
    protocol: url.protocol,
    hostname: url.hostname,
    port: Number(url.port),
    path: "/",
    query: {},
    headers: { host: url.host, "content-type": "application/x-www-form-urlencoded; charset=utf-8" },
    body,
  });
  const res = await fetch(url, { method: "POST", headers: signed.headers, body });
  return { status: res.status, text: await res.text() };
}

async function call(moto: Moto, service: "iam" | "sts", params: Record<string, string>): Promise<string> {
  const { status, text } = await motoCall(moto, service, params);
  if (status !== 200)
    throw new Error(`moto ${service} ${params.Action}: HTTP ${status} ${text.slice(0, 300)}`);
  return text;
}

export function element(xml: string, name: string): string {
  const m = new RegExp(`<${name}>([^<]*)</${name}>`).exec(xml);
  if (!m) throw new Error(`moto answer without <${name}>`);
  return m[1] as string;
}

/** Creates an IAM role (trusting EC2, as an instance profile's would); returns its ARN. */
export async function createRole(name: string, moto: Moto = anyKeyMoto()): Promise<string> {
  const trust = JSON.stringify({
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: moto.trusted
          ? { Service: "ec2.amazonaws.com", AWS: moto.trusted }
          : { Service: "ec2.amazonaws.com" },
        Action: "sts:AssumeRole",
      },
    ],
  });
  const xml = await call(moto, "iam", {
    Action: "CreateRole",
    Version: "2010-05-08",
    RoleName: name,
    AssumeRolePolicyDocument: trust,
  });
  return element(xml, "Arn");
}

/** Temporary credentials of the role for one session (an instance profile uses the instance id). */
export async function assumeRole(
  roleArn: string,
  session: string,
  moto: Moto = anyKeyMoto(),
): Promise<AwsCredentialIdentity> {
  const xml = await call(moto, "sts", {
    Action: "AssumeRole",
    Version: "2011-06-15",
    RoleArn: roleArn,
    RoleSessionName: session,
  });
  return {
    accessKeyId: element(xml, "AccessKeyId"),
    secretAccessKey: element(xml, "SecretAccessKey"),
    sessionToken: element(xml, "SessionToken"),
  };
}
