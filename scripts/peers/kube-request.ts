/**
 * One raw JSON request to a Kubernetes API server with a bearer token: objects go as they are
 * written (client-node's typed serializer drops keys it has no model field for, such as a CRD's
 * x-kubernetes-int-or-string). Used by the capi peer's runner and the controller tests' harness.
 */
import { request } from "node:https";

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects as parsed
export type KubeObject = any;

export interface KubeTarget {
  readonly server: string;
  readonly ca: Buffer;
  readonly token: string;
}

export function kubeRequest(
  target: KubeTarget,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; body: KubeObject }> {
  const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, target.server),
      {
        method,
        ca: target.ca,
        timeout: 30_000,
        headers: {
          authorization: `Bearer ${target.token}`,
          "content-type": "application/json",
          ...(data ? { "content-length": String(data.length) } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          let parsed: KubeObject = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // not JSON
          }
          resolve({ status: res.statusCode ?? 0, body: parsed });
        });
      },
    );
    req.on("timeout", () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.on("error", reject);
    req.end(data);
  });
}
