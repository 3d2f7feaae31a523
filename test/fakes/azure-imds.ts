/**
 * FAKE Azure Instance Metadata Service, managed-identity endpoint only (no real IMDS runs
 * outside Azure): `GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=R
 * [&client_id=|&object_id=|&msi_res_id=]`, answering Microsoft's documented JSON
 * `{access_token, client_id, expires_in, expires_on, ext_expires_in, not_before, resource,
 * token_type}` (numbers as strings). The access token is signed with a local test key
 * (jwks-server.ts) in the claim shape of Entra ID's managed-identity tokens ("Access token
 * claims reference"):
 *
 *   v1: {aud: R, iss: "https://sts.windows.net/{tid}/", iat, nbf, exp (+24 h), aio, appid,
 *        appidacr: "2", idp, idtyp: "app", oid, rh, sub: oid, tid, uti, ver: "1.0", xms_mirid}
 *   v2: iss "https://login.microsoftonline.com/{tid}/v2.0", azp/azpacr for appid/appidacr, ver "2.0"
 *
 * `xms_mirid` is the VM's ARM id for the system-assigned identity; for a user-assigned one it is
 * the identity's id and `xms_az_rid` is the VM's. Header {typ, alg: "RS256", x5t, kid}.
 * As the real service: no `Metadata: true` header is 400 "Required metadata header not
 * specified"; `X-Forwarded-For` is 400; no api-version or resource is 400; an identity it
 * cannot pick is 400 "Identity not found". The error wording beyond those is approximate.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { signJwt, type TestKey } from "./jwks-server.ts";

export const TOKEN_PATH = "/metadata/identity/oauth2/token";

export interface ManagedIdentity {
  readonly objectId: string;
  readonly clientId: string;
}

export interface UserAssignedIdentity extends ManagedIdentity {
  readonly name: string;
  readonly resourceGroup: string;
}

export interface AzureVm {
  readonly tenant: string;
  readonly subscription: string;
  readonly resourceGroup: string;
  readonly vmName: string;
  /** The resource the identities are used from; default this VM's ARM id (scale sets, App Service: set it). */
  readonly resourceId?: string;
  readonly systemAssigned?: ManagedIdentity;
  readonly userAssigned?: readonly UserAssignedIdentity[];
}

export const EXAMPLE_VM: AzureVm = {
  tenant: "72f988bf-86f1-41af-91ab-2d7cd011db47",
  subscription: "0b1f6471-1bf0-4dda-aec3-cb9272f09590",
  resourceGroup: "Bootseal-RG",
  vmName: "Web-1",
  systemAssigned: {
    objectId: "9f4e5a1c-2b8d-4c6e-8a7f-1d2e3f4a5b6c",
    clientId: "3c2a1b0d-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
  },
  userAssigned: [
    {
      name: "bootseal-machines",
      resourceGroup: "identities",
      objectId: "a1b2c3d4-e5f6-4789-a0b1-c2d3e4f5a6b7",
      clientId: "b7a6f5e4-d3c2-4b1a-9087-f6e5d4c3b2a1",
    },
  ],
};

export function vmResourceId(vm: AzureVm): string {
  return (
    vm.resourceId ??
    `/subscriptions/${vm.subscription}/resourcegroups/${vm.resourceGroup}/providers/Microsoft.Compute/virtualMachines/${vm.vmName}`
  );
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
}

export interface AzureImdsFake {
  /** `http://127.0.0.1:PORT`, the form BOOTSEAL_AZURE_IMDS_ENDPOINT takes. */
  readonly endpoint: string;
  readonly requests: readonly RecordedRequest[];
  close(): Promise<void>;
}

export async function startAzureImds(
  key: TestKey,
  vm: AzureVm = EXAMPLE_VM,
  options: { version?: "1.0" | "2.0" } = {},
): Promise<AzureImdsFake> {
  const version = options.version ?? "1.0";
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://169.254.169.254");
    const q = url.searchParams;
    requests.push({ method: req.method ?? "", path: url.pathname, query: q, headers: req.headers });
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify(body));
    };
    const bad = (description: string): void =>
      json(400, { error: "invalid_request", error_description: description });
    if (req.headers["x-forwarded-for"] !== undefined) return bad("Request contains X-Forwarded-For header");
    if (req.headers.metadata !== "true") return bad("Required metadata header not specified");
    if (req.method !== "GET" || url.pathname !== TOKEN_PATH) return json(404, { error: "Not found" });
    if (!q.get("api-version"))
      return json(400, { error: "Bad request. api-version was not specified in the request" });
    const resource = q.get("resource");
    if (!resource) return bad("Required audience parameter not specified");
    const picked = pickIdentity(vm, q);
    if (typeof picked === "string") return bad(picked);
    const iat = Math.floor(Date.now() / 1000);
    const exp = iat + 86_399;
    const issuer =
      version === "1.0"
        ? `https://sts.windows.net/${vm.tenant}/`
        : `https://login.microsoftonline.com/${vm.tenant}/v2.0`;
    const claims: Record<string, unknown> = {
      aud: resource,
      iss: issuer,
      iat,
      nbf: iat,
      exp,
      aio: "E2ZgYJh+fake",
    };
    if (version === "1.0") Object.assign(claims, { appid: picked.clientId, appidacr: "2", idp: issuer });
    else Object.assign(claims, { azp: picked.clientId, azpacr: "2" });
    Object.assign(claims, {
      idtyp: "app",
      oid: picked.objectId,
      rh: "0.AAAA-fake.",
      sub: picked.objectId,
      tid: vm.tenant,
      uti: randomUUID().replace(/-/g, "").slice(0, 22),
      ver: version,
      xms_mirid: picked.mirid,
    });
    if (picked.azRid !== undefined) claims.xms_az_rid = picked.azRid;
    signJwt(key, claims, { x5t: key.kid }).then(
      (token) =>
        json(200, {
          access_token: token,
          client_id: picked.clientId,
          expires_in: String(exp - iat),
          expires_on: String(exp),
          ext_expires_in: String(exp - iat),
          not_before: String(iat),
          resource,
          token_type: "Bearer",
        }),
      () => json(500, { error: "signing failed" }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    requests,
    close() {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface Picked extends ManagedIdentity {
  readonly mirid: string;
  readonly azRid: string | undefined;
}

/** IMDS's choice: the named user-assigned identity, else the system-assigned one, else the only one. */
function pickIdentity(vm: AzureVm, q: URLSearchParams): Picked | string {
  const users = vm.userAssigned ?? [];
  const rid = vmResourceId(vm);
  const uamiId = (u: UserAssignedIdentity): string =>
    `/subscriptions/${vm.subscription}/resourcegroups/${u.resourceGroup}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/${u.name}`;
  const user = (u: UserAssignedIdentity): Picked => ({ ...u, mirid: uamiId(u), azRid: rid });
  const clientId = q.get("client_id");
  const objectId = q.get("object_id");
  const resId = q.get("msi_res_id");
  if (clientId || objectId || resId) {
    const found = users.find(
      (u) =>
        u.clientId === clientId ||
        u.objectId === objectId ||
        uamiId(u).toLowerCase() === resId?.toLowerCase(),
    );
    return found ? user(found) : "Identity not found";
  }
  if (vm.systemAssigned) return { ...vm.systemAssigned, mirid: rid, azRid: undefined };
  if (users.length === 1) return user(users[0] as UserAssignedIdentity);
  if (users.length > 1) {
    return "Multiple user assigned identities exist, please specify the clientId / resourceId of the identity in the token request";
  }
  return "Identity not found";
}
