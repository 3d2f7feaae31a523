/**
 * The machine side of an AWS IAM login: an `sts:GetCallerIdentity` request signed with the
 * machine's own credentials (the SDK's default chain: environment, IRSA web identity, the
 * instance profile, ...) by the SDK's SigV4 signer, with SERVER_ID_HEADER inside the
 * signature. The signed request itself is the credential (base64 JSON {method, url, headers,
 * body}); the machine's keys never leave it, and the signature is good for one call, this
 * one, for 15 minutes. The SDK modules load only when this method is used.
 */
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider, HttpRequest } from "@smithy/types";
import { NodeSha256 } from "../../../providers/aws-sha256.ts";
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
