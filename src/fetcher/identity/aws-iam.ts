/**
 * The machine side of an AWS IAM login: an `sts:GetCallerIdentity` request signed with the
 * machine's own credentials (the SDK's default chain: environment, IRSA web identity, the
 * instance profile, ...) by the SDK's SigV4 signer, with SERVER_ID_HEADER inside the
 * signature. The signed request itself is the credential (base64 JSON {method, url, headers,
 * body}); the machine's keys never leave it, and the signature is good for one call, this
 * one, for 15 minutes. The SDK modules load only when this method is used.
 */
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import type {
  AwsCredentialIdentity,
  AwsCredentialIdentityProvider,
  Checksum,
  HttpRequest,
  SourceData,
} from "@smithy/types";
import { BootsealError } from "../../errors.ts";
import { AWS_GET_CALLER_IDENTITY_BODY, SERVER_ID_HEADER } from "../../machine/identity-login.ts";
import type { CredentialContext, IdentityProvider } from "./provider.ts";

export interface AwsIamProviderOptions {
  /** The region the request is signed for; default AWS_REGION, AWS_DEFAULT_REGION, us-east-1. */
  readonly region?: string;
  /** The STS endpoint; default AWS_ENDPOINT_URL_STS, else https://sts.<region>.amazonaws.com. */
  readonly endpoint?: string;
  /** Credentials instead of the SDK's default chain (tests, embedders). */
  readonly credentials?: AwsCredentialIdentity | AwsCredentialIdentityProvider;
}

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}

/** SHA-256 and HMAC-SHA-256 from node:crypto, in the shape the signer takes. */
class NodeSha256 implements Checksum {
  readonly #secret: Uint8Array | undefined;
  #hash: Hash | Hmac;

  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : toBytes(secret);
    this.#hash = this.#fresh();
  }

  #fresh(): Hash | Hmac {
    return this.#secret === undefined ? createHash("sha256") : createHmac("sha256", this.#secret);
  }

  update(data: Uint8Array): void {
    this.#hash.update(toBytes(data));
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }

  reset(): void {
    this.#hash = this.#fresh();
  }
}

export function stsSettings(
  options: AwsIamProviderOptions,
  env: CredentialContext["env"],
): { region: string; endpoint: URL } {
  const region = options.region || env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1";
  const text = options.endpoint || env.AWS_ENDPOINT_URL_STS || `https://sts.${region}.amazonaws.com`;
  let endpoint: URL;
  try {
    endpoint = new URL(text);
  } catch {
    throw new BootsealError("USAGE", "--aws-sts-endpoint is not a valid URL");
  }
  if (!/^https?:$/.test(endpoint.protocol) || endpoint.search || endpoint.username) {
    throw new BootsealError("USAGE", "--aws-sts-endpoint wants an http(s) URL without query or credentials");
  }
  return { region, endpoint };
}

export function awsIamProvider(options: AwsIamProviderOptions = {}): IdentityProvider {
  let credentials = options.credentials;
  return {
    method: "aws-iam",
    async credential(ctx: CredentialContext): Promise<string> {
      const { region, endpoint } = stsSettings(options, ctx.env);
      const [{ SignatureV4 }, { defaultProvider }] = await Promise.all([
        import("@smithy/signature-v4"),
        import("@aws-sdk/credential-provider-node"),
      ]);
      // Memoized by the SDK: a retried login does not walk the chain again.
      credentials ??= defaultProvider({ timeout: 2000, maxRetries: 2 });
      const signer = new SignatureV4({ credentials, region, service: "sts", sha256: NodeSha256 });
      const path = endpoint.pathname || "/";
      let signed: HttpRequest;
      try {
        signed = await signer.sign({
          method: "POST",
          protocol: endpoint.protocol,
          hostname: endpoint.hostname,
          port: endpoint.port ? Number(endpoint.port) : undefined,
          path,
          query: {},
          headers: {
            host: endpoint.host,
            "content-type": "application/x-www-form-urlencoded; charset=utf-8",
            [SERVER_ID_HEADER]: ctx.audience,
          },
          body: AWS_GET_CALLER_IDENTITY_BODY,
        });
      } catch (cause) {
        const why = cause instanceof Error ? cause.message.split("\n")[0]?.slice(0, 200) : String(cause);
        throw new BootsealError(
          "KEY_UNAVAILABLE",
          `no AWS credentials for the aws-iam login (environment, web identity, instance profile): ${why}`,
          { cause },
        );
      }
      const request = {
        method: "POST",
        url: `${endpoint.origin}${path}`,
        headers: signed.headers,
        body: AWS_GET_CALLER_IDENTITY_BODY,
      };
      return Buffer.from(JSON.stringify(request), "utf8").toString("base64");
    },
  };
}
