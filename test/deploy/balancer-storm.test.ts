/**
 * A balanced deployment boots 200 machines at once through one address (issue #30): the chart
 * rendered by the real helm, the real service (`node dist/cli/main.js serve`, the image's
 * entrypoint; `npm run build` first) started with exactly the rendered settings, on the SeaweedFS
 * peer as its S3 store, behind a balancer double on loopback.
 *
 * What is taken from the rendering: the container's arguments (asserted to be exactly `serve
 * --config … --listen … --data-dir …`), its env values, the Secret named by envFrom (here the
 * SeaweedFS credentials) and the ConfigMap's bootseal.yaml. What is changed for loopback: the
 * listen address (127.0.0.1, a free port), the data directory (the service default `./data`
 * under the test's directory, its working directory, instead of the pod's emptyDir), and the
 * in-pod file paths of the ServiceAccount token and CA (placeholder files: the storm uses a
 * static controller token, so no TokenReview is made). One replica: the cap is per replica, and
 * one replica taking the whole storm is the harder case.
 *
 * The balancer is a TCP proxy (test/helpers/tcp-proxy.ts), a double of what the pods see behind
 * a Kubernetes Service with externalTrafficPolicy Cluster, an ingress controller or a NAT
 * gateway: every connection arrives from one address (127.0.0.1) and carries no
 * X-Forwarded-For. Through it, per machine: a publish with the controller token, a fetch of its
 * config with its bootstrap token, five status posts; 200 machines at once (bench/lib's storm
 * client: one keep-alive socket per machine in flight). Then every machine's status is read back.
 *
 *   balanced (service.type LoadBalancer, the chart's defaults): 0 refused, every status recorded;
 *   the ingress named in trustProxy (the cap 64 kept): 0 refused;
 *   the same storm with the values for machines that connect directly (externalTrafficPolicy
 *   Local: the chart keeps the cap at 64): refused with 503 by the cap, so this test can fail.
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { CreateBucketCommand } from "@aws-sdk/client-s3";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { parse as parseYaml } from "yaml";
import { type BenchServer, startServe } from "../../bench/lib/serve.ts";
import {
  HttpClient,
  type Machine,
  newRecorder,
  PHASES,
  publishAll,
  type Recorder,
  storm,
} from "../../bench/lib/storm-client.ts";
import { bootsealProtocol, NAMESPACE, payloadMaker } from "../../bench/lib/storm-protocols.ts";
import { uniqueName } from "../helpers/peers.ts";
import { rawS3, removeS3Bucket, seaweedfs } from "../helpers/s3.ts";
import { type TcpProxy, tcpProxy } from "../helpers/tcp-proxy.ts";
import { chartTools, localized, type Obj, only, RELEASE, ROOT } from "./chart.ts";

const MACHINES = 200;
const DIST = join(ROOT, "dist", "cli", "main.js");
const STORE_SECRET = "bootseal-store";
const dir = mkdtempSync(join(tmpdir(), "bootseal-balancer-storm-"));
const { render } = chartTools(dir, "bootseal-system");
const caPem = readFileSync(join(ROOT, "test", "fixtures", "helm", "ca.crt"), "utf8");
const bucket = uniqueName("balancer-storm");
const controllerToken = randomBytes(32).toString("base64url");
let recipient = "";

before(async () => {
  assert.ok(existsSync(DIST), `${DIST} is missing: run npm run build first`);
  recipient = await identityToRecipient(await generateX25519Identity());
  await rawS3(seaweedfs()).send(new CreateBucketCommand({ Bucket: bucket }));
});

after(async () => {
  await removeS3Bucket(seaweedfs(), bucket);
  rmSync(dir, { recursive: true, force: true });
});

/** An install's values: an S3 store on the SeaweedFS peer, one age rule, a controller token. */
function installValues(prefix: string, balancer: Obj): Obj {
  return {
    publicUrl: "https://bootseal.mgmt.example.com",
    store: {
      url: `s3://${bucket}/${prefix}`,
      existingSecret: STORE_SECRET,
      s3: { endpoint: seaweedfs().endpoint, region: "us-east-1", forcePathStyle: true },
    },
    config: {
      inline: {
        creation_rules: [{ age: recipient }],
        controllers: [
          {
            name: "capi-ci",
            tokenSha256: createHash("sha256").update(controllerToken).digest("hex"),
            scopes: ["configs:write", "tokens:mint", "status:read"],
          },
        ],
      },
    },
    ...balancer,
  };
}

/** The Secrets the rendered pod takes env from: the store's (the SeaweedFS peer's keys). */
function secretEnv(name: string): Record<string, string> {
  assert.equal(name, STORE_SECRET, `the pod wants a Secret the test does not have: ${name}`);
  const p = seaweedfs();
  return {
    AWS_ACCESS_KEY_ID: p.credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: p.credentials.secretAccessKey,
  };
}

interface Rendered {
  readonly config: Obj;
  readonly env: Record<string, string>;
}

/** The service's settings as the chart renders them for these values. */
async function rendered(values: Obj, name: string): Promise<Rendered> {
  const objects = await render(values, name);
  const server = only(objects, "Deployment", `${RELEASE}-bootseal`);
  const [c] = server.spec.template.spec.containers;
  const flags = c.args.filter((a: string) => a.startsWith("-"));
  assert.deepEqual(
    [c.args[0], ...flags],
    ["serve", "--config", "--listen", "--data-dir"],
    "the rendered command line has only the flags this test replaces",
  );
  const env: Record<string, string> = {};
  for (const e of c.env) {
    assert.ok("value" in e, `${e.name}: a plain value (the test has no Secret for ${JSON.stringify(e)})`);
    env[e.name] = e.value;
  }
  for (const from of c.envFrom ?? []) Object.assign(env, secretEnv(from.secretRef.name));
  const config = localized(dir, parseYaml(only(objects, "ConfigMap").data["bootseal.yaml"]), caPem);
  return { config, env };
}

interface StormRun {
  readonly rec: Recorder;
  readonly machines: Machine[];
}

/** 200 machines at once through one address: publish, fetch, five status posts each. */
async function bootStorm(url: string, prefix: string): Promise<StormRun> {
  const signal = AbortSignal.timeout(240_000);
  const client = new HttpClient([url], MACHINES, signal);
  const protocol = bootsealProtocol(controllerToken, payloadMaker(2048), true);
  const machines: Machine[] = Array.from({ length: MACHINES }, (_, i) => ({ name: `${prefix}-${i}` }));
  const rec = newRecorder();
  try {
    await publishAll(client, protocol, machines, MACHINES, rec, signal);
    await storm(client, protocol, machines, MACHINES, 1, rec, signal);
  } finally {
    client.close();
  }
  return { rec, machines };
}

/** Every machine's status record, read back with the controller token. */
async function phasesOf(url: string, machines: readonly Machine[]): Promise<Map<string, Obj>> {
  const out = new Map<string, Obj>();
  for (const m of machines) {
    const res = await fetch(`${url}/v1/machines/${NAMESPACE}/${m.name}/status`, {
      headers: { authorization: `Bearer ${controllerToken}` },
    });
    assert.equal(res.status, 200, `status of ${m.name}: ${res.status}`);
    out.set(m.name, (await res.json()) as Obj);
  }
  return out;
}

function failureSummary(rec: Recorder): string {
  const byKind = new Map<string, number>();
  for (const f of rec.failures) {
    const key = `${f.kind} ${f.status ?? "socket"}`;
    byKind.set(key, (byKind.get(key) ?? 0) + 1);
  }
  const first = rec.failures.slice(0, 3).map((f) => `${f.kind} ${f.machine}: ${f.message}`);
  return `${[...byKind].map(([k, n]) => `${n} × ${k}`).join(", ")}; first: ${first.join(" | ")}`;
}

/** The rendered service behind the balancer double, for the length of `body`. */
async function behindBalancer<T>(
  settings: Rendered,
  name: string,
  body: (balancer: TcpProxy, service: BenchServer) => Promise<T>,
): Promise<T> {
  const service = await startServe(DIST, dir, name, settings.config, settings.env);
  const balancer = await tcpProxy(new URL(service.url));
  try {
    return await body(balancer, service);
  } finally {
    await balancer.close();
    await service.stop();
  }
}

describe("a balanced deployment boots 200 machines at once through one address (the balancer: a TCP proxy double of the Service)", () => {
  test("balanced (a LoadBalancer Service, the chart's defaults): 0 refused, every status recorded", async () => {
    const settings = await rendered(
      installValues("balanced", { service: { type: "LoadBalancer" } }),
      "balanced",
    );
    assert.equal((settings.config.limits as Obj).maxConnectionsPerAddress, 0, "the chart turned the cap off");
    assert.equal(settings.config.trustProxy, undefined, "and believes no X-Forwarded-For");
    await behindBalancer(settings, "balanced", async (balancer, service) => {
      const { rec, machines } = await bootStorm(balancer.url, "balanced");
      assert.deepEqual(rec.failures, [], `refused or failed: ${failureSummary(rec)}`);
      assert.equal(rec.latencies.publish.length, MACHINES);
      assert.equal(rec.latencies.fetch.length, MACHINES);
      assert.equal(rec.latencies.status.length, MACHINES * PHASES.length);
      assert.equal(rec.verified, MACHINES, "every fetched config is the machine's SOPS document");
      assert.ok(
        balancer.connections() >= MACHINES,
        `${balancer.connections()} connections through one address`,
      );
      for (const [name, record] of await phasesOf(service.url, machines)) {
        assert.equal(record.phase, "succeeded", `${name}: its last phase`);
        const reported = (record.history as Obj[]).map((e) => e.phase).filter((p) => PHASES.includes(p));
        assert.deepEqual(reported, [...PHASES], `${name}: every status recorded, in order`);
      }
    });
  });

  test("the ingress's address named in trustProxy (the cap 64 kept for everyone else): 0 refused", async () => {
    const values = installValues("trusted", {
      trustProxy: ["127.0.0.1/32"],
      limits: { maxConnectionsPerAddress: 64 },
    });
    const settings = await rendered(values, "trusted");
    assert.equal((settings.config.limits as Obj).maxConnectionsPerAddress, 64);
    assert.deepEqual(settings.config.trustProxy, ["127.0.0.1/32"]);
    await behindBalancer(settings, "trusted", async (balancer) => {
      const { rec } = await bootStorm(balancer.url, "trusted");
      assert.deepEqual(rec.failures, [], `refused or failed: ${failureSummary(rec)}`);
      assert.equal(rec.latencies.status.length, MACHINES * PHASES.length);
    });
  });

  test("the same storm with the values for direct clients (externalTrafficPolicy Local) is refused by the cap", async (t) => {
    const values = installValues("direct", {
      service: { type: "LoadBalancer", externalTrafficPolicy: "Local" },
    });
    const settings = await rendered(values, "direct");
    assert.equal((settings.config.limits as Obj).maxConnectionsPerAddress, 64);
    await behindBalancer(settings, "direct", async (balancer) => {
      const { rec } = await bootStorm(balancer.url, "direct");
      t.diagnostic(`refused: ${failureSummary(rec)}`);
      const refused = rec.failures.filter((f) => f.status === 503);
      assert.ok(refused.length > 0, "the per-address cap refused part of the storm");
      assert.ok(
        refused.every((f) => f.message.includes("too many open connections")),
        `every 503 is the cap's: ${failureSummary(rec)}`,
      );
      for (const f of rec.failures) {
        assert.ok(f.status === 503 || f.status === undefined, `only the cap refuses: ${f.kind} ${f.message}`);
      }
    });
  });
});
