/**
 * FAKE Compute Engine metadata server (no real one runs outside Google Cloud): the instance
 * identity endpoint `GET /computeMetadata/v1/instance/service-accounts/default/identity
 * ?audience=AUD[&format=standard|full][&licenses=TRUE]`, signing with a local test key
 * (jwks-server.ts) the claims Google documents ("Verify VM identity", Compute Engine docs):
 *
 *   standard: {aud, azp, email, email_verified, exp, iat, iss: "https://accounts.google.com", sub}
 *   full:     the same plus google.compute_engine {instance_creation_timestamp, instance_id,
 *             instance_name, project_id, project_number, zone} (and license_id with licenses=TRUE)
 *
 * header {alg: "RS256", kid, typ: "JWT"}; tokens live one hour. As the real server: every answer
 * carries `Metadata-Flavor: Google`; a request without `Metadata-Flavor: Google` is 403, one
 * with `X-Forwarded-For` is 403; no audience is 400; an instance without a service account
 * answers 404. The body is the bare JWT. Every request is recorded (path, query, headers).
 */
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { signJwt, type TestKey } from "./jwks-server.ts";

export const IDENTITY_PATH = "/computeMetadata/v1/instance/service-accounts/default/identity";

export interface GceInstance {
  readonly projectId: string;
  readonly projectNumber: number;
  readonly zone: string;
  readonly instanceName: string;
  readonly instanceId: string;
  readonly creationTimestamp: number;
  /** The attached service account; undefined: none attached (the identity endpoint is 404). */
  readonly serviceAccount?: { readonly email: string; readonly uniqueId: string };
}

export const EXAMPLE_INSTANCE: GceInstance = {
  projectId: "bootseal-test-1",
  projectNumber: 716149158341,
  zone: "europe-west1-b",
  instanceName: "web-1",
  instanceId: "4340508760561261530",
  creationTimestamp: 1_790_000_000,
  serviceAccount: {
    email: "716149158341-compute@developer.gserviceaccount.com",
    uniqueId: "110987294251917851298",
  },
};

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
}

export interface GceMetadataFake {
  /** `127.0.0.1:PORT`, the form GCE_METADATA_HOST takes. */
  readonly host: string;
  readonly requests: readonly RecordedRequest[];
  close(): Promise<void>;
}

export async function startGceMetadata(
  key: TestKey,
  instance: GceInstance = EXAMPLE_INSTANCE,
): Promise<GceMetadataFake> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://metadata.google.internal");
    requests.push({
      method: req.method ?? "",
      path: url.pathname,
      query: url.searchParams,
      headers: req.headers,
    });
    const text = (status: number, body: string): void => {
      res
        .writeHead(status, { "metadata-flavor": "Google", "content-type": "text/html; charset=UTF-8" })
        .end(body);
    };
    if (req.headers["x-forwarded-for"] !== undefined)
      return text(403, "<p>Request denied: X-Forwarded-For present.</p>");
    if (req.headers["metadata-flavor"] !== "Google") {
      return text(
        403,
        `<p>Your client does not have permission to get URL <code>${url.pathname}</code> from this server. Missing Metadata-Flavor:Google header.</p>`,
      );
    }
    if (req.method !== "GET" || url.pathname !== IDENTITY_PATH) return text(404, "<p>Not Found</p>");
    const audience = url.searchParams.get("audience");
    if (!audience) return text(400, "non-empty audience parameter required\n");
    const sa = instance.serviceAccount;
    if (!sa) return text(404, "<p>service account default not found</p>");
    const format = url.searchParams.get("format") ?? "standard";
    if (format !== "standard" && format !== "full") return text(400, "invalid format\n");
    const iat = Math.floor(Date.now() / 1000);
    const claims: Record<string, unknown> = {
      aud: audience,
      azp: sa.uniqueId,
      email: sa.email,
      email_verified: true,
      exp: iat + 3600,
      iat,
      iss: "https://accounts.google.com",
      sub: sa.uniqueId,
    };
    if (format === "full") {
      const engine: Record<string, unknown> = {
        instance_creation_timestamp: instance.creationTimestamp,
        instance_id: instance.instanceId,
        instance_name: instance.instanceName,
        project_id: instance.projectId,
        project_number: instance.projectNumber,
        zone: instance.zone,
      };
      if (url.searchParams.get("licenses") === "TRUE") engine.license_id = ["5926592092274602096"];
      claims.google = { compute_engine: engine };
    }
    signJwt(key, claims).then(
      (jwt) =>
        res.writeHead(200, { "metadata-flavor": "Google", "content-type": "application/text" }).end(jwt),
      () => text(500, "signing failed"),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    host: `127.0.0.1:${port}`,
    requests,
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
