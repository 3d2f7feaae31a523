/**
 * The Helm chart (deploy/helm/bootseal) with the real helm (scripts/peers/helm.sh, built from
 * helm.sh/helm/v3) and the real kube-apiserver (scripts/peers/kube.sh):
 *
 * - `helm lint --strict`, and `helm template` with the default values and with every optional
 *   feature on (an S3 variant with the configuration inline, a GCS variant with the
 *   configuration in an existing Secret);
 * - assertions on the rendered objects: non-root, read-only root file system, probes, replicas,
 *   the PodDisruptionBudget and NetworkPolicies, RBAC rules exactly the least-privilege set, the
 *   controller's token wired to the service's audience and binding, no credential in a
 *   ConfigMap; the rendered bootseal.yaml accepted by the service's own configuration validator;
 * - the CRDs in crds/ (whatever they hold: assertions are on names and kinds only) installed for
 *   real and established, a copy of the Prometheus Operator's ServiceMonitor CRD (its real
 *   group, kind and a subset of its schema: test/fixtures/helm/) installed beside them, then
 *   every rendered object created with dryRun=All and fieldValidation=Strict in a fresh
 *   namespace, so the API server checks each against its real schema; the BootsealConfig and
 *   BootsealConfigTemplate of docs/cluster-api.md dry-run-created against the installed CRDs.
 */
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  CoreV1Api,
  HttpMethod,
  KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  VersionApi,
} from "@kubernetes/client-node";
import { parse as parseYaml } from "yaml";
import { applyEnv, validateServiceConfig } from "../../src/config/service-config.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";
import {
  CHART,
  chartTools,
  KUBE_VERSION,
  localized,
  type Obj,
  only,
  parseAll,
  RELEASE,
  ROOT,
} from "./chart.ts";

const FIELD_MANAGER = "bootseal-helm-test";
const ns = uniqueName("bootseal-helm");
const dir = mkdtempSync(join(tmpdir(), "bootseal-helm-"));
after(() => rmSync(dir, { recursive: true, force: true }));
const { helm, valuesFile, render, templateRefused } = chartTools(dir, ns);

// ---------------------------------------------------------------- values

const ARN = "arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";
const RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";

/** The one value without a default: what a first install must set. */
const MINIMAL = { publicUrl: "https://bootseal.mgmt.example.com" };

/** Every optional feature on, S3 store, bootseal.yaml inline. */
const ALL_S3 = {
  replicaCount: 3,
  image: { repository: "registry.example.com/bootseal", digest: `sha256:${"ab".repeat(32)}` },
  imagePullSecrets: [{ name: "registry" }],
  commonLabels: { team: "platform" },
  publicUrl: "https://bootseal.mgmt.example.com",
  store: {
    url: "s3://bootseal-configs/prod",
    existingSecret: "bootseal-store",
    s3: { endpoint: "https://minio.mgmt.example.com", region: "eu-west-1", forcePathStyle: true },
  },
  config: {
    inline: {
      creation_rules: [{ path_regex: "^cluster-", kms: ARN }, { age: RECIPIENT }],
      controllers: [{ name: "ci", tokenSha256: "a".repeat(64), scopes: ["status:read"] }],
      kubernetesBindings: [{ serviceAccount: "monitoring/*", scopes: ["status:read"] }],
      oneTimeFetch: "after-success",
      limits: { maxConnections: 1024, maxConnectionsPerAddress: 8 },
      machineAuth: {
        bindings: [
          {
            method: "aws-iam",
            match: { arn: "arn:aws:iam::111122223333:role/bootseal-nodes" },
            machines: "cluster-a/*",
          },
        ],
      },
    },
  },
  kms: { existingSecret: "bootseal-kms" },
  tls: { existingSecret: "bootseal-tls" },
  derivationKey: { existingSecret: "bootseal-derivation-key" },
  controllerAuth: { kubernetes: { audience: "bootseal-prod", cacheTtl: "30s" } },
  kubernetesBindings: [
    {
      serviceAccount: "team-a/capi-controller",
      scopes: ["configs:write", "status:read"],
      namespaces: ["team-a"],
    },
  ],
  extraEnv: [{ name: "AWS_REGION", value: "eu-west-1" }],
  serviceAccount: {
    annotations: { "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/bootseal" },
  },
  service: {
    type: "LoadBalancer",
    externalTrafficPolicy: "Local",
    loadBalancerSourceRanges: ["10.0.0.0/8"],
    annotations: { a: "b" },
  },
  trustProxy: ["10.244.0.0/16"],
  podDisruptionBudget: { minAvailable: 2 },
  networkPolicy: {
    ingress: { from: [{ ipBlock: { cidr: "10.0.0.0/8" } }] },
    egress: {
      store: { to: [{ ipBlock: { cidr: "10.20.0.0/16" } }], ports: [{ protocol: "TCP", port: 443 }] },
      kms: { to: [{ ipBlock: { cidr: "10.21.0.0/16" } }], ports: [{ protocol: "TCP", port: 443 }] },
      apiServer: { to: [{ ipBlock: { cidr: "10.0.0.1/32" } }], ports: [{ protocol: "TCP", port: 6443 }] },
      extra: [{ to: [{ ipBlock: { cidr: "10.30.0.0/16" } }], ports: [{ protocol: "TCP", port: 8200 }] }],
    },
  },
  serviceMonitor: { enabled: true, labels: { release: "kube-prometheus-stack" }, interval: "15s" },
  podAnnotations: { "example.com/a": "b" },
  podLabels: { tier: "security" },
  nodeSelector: { "kubernetes.io/os": "linux" },
  tolerations: [{ key: "mgmt", operator: "Exists", effect: "NoSchedule" }],
  affinity: {
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: "kubernetes.io/arch", operator: "In", values: ["amd64"] }] },
        ],
      },
    },
  },
  controller: {
    namespaces: ["cluster-*"],
    tokenExpirationSeconds: 7200,
    resync: "5m",
    concurrency: 8,
    extraEnv: [{ name: "NODE_OPTIONS", value: "--max-old-space-size=256" }],
    serviceAccount: { annotations: { "example.com/owner": "platform" } },
    networkPolicy: {
      metricsFrom: [{ namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "monitoring" } } }],
      extraEgress: [{ to: [{ ipBlock: { cidr: "10.40.0.0/16" } }], ports: [{ protocol: "TCP", port: 443 }] }],
    },
    podAnnotations: { "example.com/c": "d" },
    nodeSelector: { "kubernetes.io/os": "linux" },
    infrastructureReadGroups: ["infrastructure.cluster.x-k8s.io"],
  },
};

/** Every optional feature on, GCS store, bootseal.yaml in an existing Secret. */
const ALL_GCS = {
  publicUrl: "https://bootseal.mgmt.example.com",
  store: { url: "gs://bootseal-configs/prod", existingSecret: "bootseal-gcs", gcsCredentialsKey: "sa.json" },
  config: { existingSecret: "bootseal-config", existingSecretKey: "config.yaml" },
  tls: { existingSecret: "bootseal-tls" },
  derivationKey: { existingSecret: "bootseal-derivation-key", key: "derivation" },
  kubernetesBindings: [{ serviceAccount: "monitoring/*", scopes: ["status:read"] }],
  serviceMonitor: { enabled: true },
  controller: { watchNamespace: "team-a", namespaces: ["team-a"] },
};

// ---------------------------------------------------------------- what the rules are

/** The controller's ClusterRole: exactly docs/cluster-api.md's least-privilege set. */
const CONTROLLER_RULES = [
  ["bootstrap.bootseal.dev", "bootsealconfigs", "get list watch update patch"],
  ["bootstrap.bootseal.dev", "bootsealconfigs/status", "get list watch update patch"],
  ["bootstrap.bootseal.dev", "bootsealconfigs/finalizers", "get list watch update patch"],
  ["bootstrap.bootseal.dev", "bootsealconfigtemplates", "get list watch"],
  ["bootstrap.cluster.x-k8s.io", "*", "get list watch create update patch delete"],
  ["cluster.x-k8s.io", "machines", "get list watch"],
  ["cluster.x-k8s.io", "clusters", "get list watch"],
  ["", "secrets", "get list watch create update patch delete"],
  ["", "events", "create patch"],
  ["events.k8s.io", "events", "create patch"],
] as const;

/** One string per (group, resource, verb, name) a set of rules grants, sorted. */
function grants(rules: Obj[]): string[] {
  const out: string[] = [];
  for (const r of rules) {
    assert.equal(r.nonResourceURLs, undefined, "no non-resource URLs");
    for (const g of r.apiGroups ?? [])
      for (const res of r.resources ?? [])
        for (const v of r.verbs ?? [])
          for (const n of r.resourceNames ?? ["(any)"]) out.push(`${g}|${res}|${v}|${n}`);
  }
  return out.sort();
}

function expectedGrants(rules: readonly (readonly [string, string, string])[], name = "(any)"): string[] {
  return rules.flatMap(([g, r, verbs]) => verbs.split(" ").map((v) => `${g}|${r}|${v}|${name}`)).sort();
}

// ---------------------------------------------------------------- checks shared by every render

function deployments(objects: Obj[]): { server: Obj; controller: Obj | undefined } {
  const server = only(objects, "Deployment", `${RELEASE}-bootseal`);
  const controller = objects.find((o) => o.kind === "Deployment" && o.metadata.name.endsWith("-controller"));
  return { server, controller };
}

function podMatches(selector: Record<string, string>, deployment: Obj): boolean {
  const labels = deployment.spec.template.metadata.labels as Record<string, string>;
  return Object.entries(selector).every(([k, v]) => labels[k] === v);
}

function assertHardened(d: Obj): void {
  const pod = d.spec.template.spec;
  const where = `${d.metadata.name}`;
  assert.equal(pod.hostNetwork ?? false, false, `${where}: hostNetwork`);
  assert.equal(pod.hostPID ?? false, false, `${where}: hostPID`);
  assert.equal(pod.hostIPC ?? false, false, `${where}: hostIPC`);
  assert.equal(pod.securityContext?.runAsNonRoot, true, `${where}: pod runAsNonRoot`);
  assert.equal(pod.securityContext?.seccompProfile?.type, "RuntimeDefault", `${where}: pod seccomp`);
  for (const v of pod.volumes ?? []) {
    assert.ok(
      v.emptyDir || v.configMap || v.secret || v.projected,
      `${where}: volume ${v.name} is ${Object.keys(v)}`,
    );
  }
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    const s = c.securityContext ?? {};
    const w = `${where}/${c.name}`;
    assert.equal(s.runAsNonRoot ?? pod.securityContext.runAsNonRoot, true, `${w}: runAsNonRoot`);
    assert.ok((s.runAsUser ?? pod.securityContext.runAsUser) > 0, `${w}: a non-zero uid`);
    assert.equal(s.readOnlyRootFilesystem, true, `${w}: readOnlyRootFilesystem`);
    assert.equal(s.allowPrivilegeEscalation, false, `${w}: allowPrivilegeEscalation`);
    assert.equal(s.privileged ?? false, false, `${w}: privileged`);
    assert.deepEqual(s.capabilities?.drop, ["ALL"], `${w}: drops ALL capabilities`);
    assert.equal(s.capabilities?.add, undefined, `${w}: adds no capability`);
    assert.equal(
      (s.seccompProfile ?? pod.securityContext.seccompProfile)?.type,
      "RuntimeDefault",
      `${w}: seccomp`,
    );
    assert.ok(
      c.resources?.requests && c.resources?.limits?.memory,
      `${w}: resource requests and a memory limit`,
    );
    // Every writable path is an emptyDir: with a read-only root, nothing else can be written.
    for (const m of c.volumeMounts ?? []) {
      const v = pod.volumes.find((x: Obj) => x.name === m.name);
      assert.ok(v, `${w}: mount ${m.name} has a volume`);
      if (!v.emptyDir) assert.equal(m.readOnly, true, `${w}: ${m.mountPath} is read-only`);
    }
  }
}

/** No credential lands in a ConfigMap or a plain env value; the chart renders no Secret at all. */
function assertNoSecretsInPlaintext(objects: Obj[]): void {
  assert.deepEqual(
    objects.filter((o) => o.kind === "Secret").map((o) => o.metadata.name),
    [],
    "the chart renders no Secret: credentials come from Secrets the operator manages",
  );
  const credentialKey =
    /^(token|password|passwd|secret|secretAccessKey|clientSecret|privateKey|apiKey|bearerToken)$/i;
  const walk = (value: unknown, path: string): void => {
    if (typeof value === "string") {
      assert.doesNotMatch(value, /-----BEGIN [A-Z ]*PRIVATE KEY-----/, `${path}: a private key`);
      assert.doesNotMatch(value, /\bbst\.[A-Za-z0-9_.-]{16,}/, `${path}: a bootstrap token`);
      assert.doesNotMatch(value, /\bAKIA[0-9A-Z]{16}\b/, `${path}: an AWS access key id`);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => {
        walk(v, `${path}[${i}]`);
      });
    } else if (value && typeof value === "object") {
      for (const [k, v] of Object.entries(value)) {
        assert.doesNotMatch(k, credentialKey, `${path}.${k}: a credential key in a ConfigMap`);
        walk(v, `${path}.${k}`);
      }
    }
  };
  for (const cm of objects.filter((o) => o.kind === "ConfigMap")) {
    for (const [key, text] of Object.entries(cm.data ?? {})) {
      walk(parseYaml(text as string), `ConfigMap ${cm.metadata.name} ${key}`);
    }
    // Controllers appear by the hash of their token only.
    const cfg = parseYaml(cm.data?.["bootseal.yaml"] ?? "{}") ?? {};
    for (const c of cfg.controllers ?? [])
      assert.deepEqual(Object.keys(c).sort(), ["name", "scopes", "tokenSha256"]);
  }
  for (const d of objects.filter((o) => o.kind === "Deployment")) {
    for (const c of d.spec.template.spec.containers) {
      for (const e of c.env ?? []) {
        // A path (…_FILE, GOOGLE_APPLICATION_CREDENTIALS) names a mounted file, not a credential.
        const isPath = typeof e.value === "string" && e.value.startsWith("/");
        if (/SECRET|PASSWORD|TOKEN|ACCESS_KEY|CREDENTIALS/.test(e.name) && !isPath) {
          assert.ok(e.valueFrom?.secretKeyRef, `${d.metadata.name}/${c.name}: ${e.name} comes from a Secret`);
        }
      }
      for (const from of c.envFrom ?? []) {
        assert.deepEqual(
          Object.keys(from),
          ["secretRef"],
          `${d.metadata.name}/${c.name}: envFrom only from Secrets`,
        );
      }
    }
  }
}

function checkServerWiring(
  objects: Obj[],
  opts: { tls: boolean; audience: string },
): { server: Obj; controller: Obj | undefined; svc: Obj; port: number } {
  const { server, controller } = deployments(objects);
  const pod = server.spec.template.spec;
  const [c] = pod.containers;
  const port = c.ports.find((p: Obj) => p.name === "http");
  assert.ok(port, "the service container names its port http");
  const scheme = opts.tls ? "HTTPS" : "HTTP";
  assert.deepEqual(c.livenessProbe.httpGet, { path: "/healthz", port: "http", scheme });
  assert.deepEqual(c.readinessProbe.httpGet, { path: "/readyz", port: "http", scheme });
  assert.ok(c.args.includes("serve") && c.args.includes("--config"));
  assert.equal(c.args[c.args.indexOf("--listen") + 1], `0.0.0.0:${port.containerPort}`);
  // The data directory and /tmp are emptyDirs (writable), everything else is read-only.
  const mounts = Object.fromEntries(c.volumeMounts.map((m: Obj) => [m.mountPath, m.name]));
  for (const path of ["/var/lib/bootseal", "/tmp"]) {
    assert.ok(pod.volumes.find((v: Obj) => v.name === mounts[path])?.emptyDir, `${path} is an emptyDir`);
  }

  // Service -> pods.
  const svc = only(objects, "Service");
  assert.ok(podMatches(svc.spec.selector, server), "the Service selects the service's pods");
  assert.ok(
    controller === undefined || !podMatches(svc.spec.selector, controller),
    "…and not the controller",
  );
  assert.equal(svc.spec.ports[0].targetPort, "http");

  // PodDisruptionBudget: at least one replica stays.
  const pdb = only(objects, "PodDisruptionBudget");
  assert.ok(pdb.spec.minAvailable >= 1, "PDB minAvailable >= 1");
  assert.ok(pdb.spec.minAvailable < server.spec.replicas, "the PDB still lets a node drain");
  assert.ok(podMatches(pdb.spec.selector.matchLabels, server), "the PDB selects the service's pods");

  // The service reviews tokens: its account is bound to system:auth-delegator, nothing more.
  assert.equal(pod.automountServiceAccountToken, true);
  const reviewer = objects.find(
    (o) => o.kind === "ClusterRoleBinding" && o.roleRef.name === "system:auth-delegator",
  ) as Obj;
  assert.ok(reviewer, "a ClusterRoleBinding to system:auth-delegator");
  assert.deepEqual(reviewer.subjects, [
    { kind: "ServiceAccount", name: pod.serviceAccountName, namespace: ns },
  ]);
  const sa = only(objects, "ServiceAccount", pod.serviceAccountName);
  assert.equal(sa.metadata.namespace, ns);
  return { server, controller, svc, port: port.containerPort as number };
}

function checkController(
  objects: Obj[],
  config: Obj,
  opts: { tls: boolean; audience: string; infrastructureReadGroups?: readonly string[] },
): void {
  const { controller } = deployments(objects);
  assert.ok(controller, "the controller's Deployment");
  assert.equal(controller.spec.replicas, 1);
  const pod = controller.spec.template.spec;
  const [c] = pod.containers;
  const arg = (flag: string) => {
    const i = c.args.indexOf(flag);
    return i < 0 ? undefined : c.args[i + 1];
  };
  assert.equal(c.args[0], "controller");
  assert.ok(c.args.includes("--leader-elect"), "--leader-elect");
  assert.deepEqual(c.livenessProbe.httpGet, { path: "/healthz", port: "health" });
  assert.deepEqual(c.readinessProbe.httpGet, { path: "/readyz", port: "health" });
  assert.equal(arg("--health-listen"), `0.0.0.0:${c.ports[0].containerPort}`);

  // --token-file is a projected token for the service's audience ...
  const tokenFile = arg("--token-file") as string;
  const mount = c.volumeMounts.find((m: Obj) => m.mountPath === dirname(tokenFile));
  assert.ok(mount, `a volume is mounted at ${dirname(tokenFile)}`);
  const volume = pod.volumes.find((v: Obj) => v.name === mount.name);
  const source = volume.projected?.sources?.find((s: Obj) => s.serviceAccountToken)?.serviceAccountToken;
  assert.ok(source, "the token is a projected ServiceAccount token");
  assert.equal(source.path, basename(tokenFile));
  assert.equal(source.audience, opts.audience);
  assert.deepEqual(
    config.controllerAuth.kubernetes.audiences,
    [opts.audience],
    "the service wants that audience",
  );
  // ... no group or other bits for the kubelet to add (a token file readable by others is refused).
  assert.equal(pod.securityContext.fsGroup, undefined, "no fsGroup on the controller's pod");

  // ... and the service grants that ServiceAccount its scopes.
  const account = `${ns}/${pod.serviceAccountName}`;
  const binding = config.kubernetesBindings.find((b: Obj) => b.serviceAccount === account);
  assert.ok(binding, `kubernetesBindings names ${account}`);
  assert.deepEqual([...binding.scopes].sort(), ["configs:write", "status:read", "tokens:mint"]);

  // --server is the chart's Service.
  const server = new URL(arg("--server") as string);
  const svc = only(objects, "Service");
  assert.equal(server.protocol, opts.tls ? "https:" : "http:");
  assert.equal(server.hostname, `${svc.metadata.name}.${ns}.svc`);
  assert.equal(Number(server.port), svc.spec.ports[0].port);
  assert.equal(arg("--ca-file") !== undefined, opts.tls, "--ca-file exactly when the service has TLS");

  // RBAC: exactly the least-privilege rules, bound to the controller's account only.
  const role = only(objects, "ClusterRole");
  // Plus `get` on the infrastructure groups a spec.tpm.ekFieldPath reads, when the values name any.
  const infraRules = (opts.infrastructureReadGroups ?? []).map((g) => [g, "*", "get"] as const);
  assert.deepEqual(grants(role.rules), expectedGrants([...CONTROLLER_RULES, ...infraRules]));
  const bindings = objects.filter(
    (o) => o.kind === "ClusterRoleBinding" && o.roleRef.name === role.metadata.name,
  );
  assert.equal(bindings.length, 1);
  assert.deepEqual(bindings[0]?.subjects, [
    { kind: "ServiceAccount", name: pod.serviceAccountName, namespace: ns },
  ]);
  const lease = only(objects, "Role");
  assert.equal(lease.metadata.namespace, ns);
  assert.deepEqual(grants(lease.rules), [
    "coordination.k8s.io|leases|create|(any)",
    "coordination.k8s.io|leases|get|bootseal-controller",
    "coordination.k8s.io|leases|update|bootseal-controller",
  ]);
  const leaseBinding = only(objects, "RoleBinding");
  assert.equal(leaseBinding.roleRef.name, lease.metadata.name);
  assert.deepEqual(leaseBinding.subjects, [
    { kind: "ServiceAccount", name: pod.serviceAccountName, namespace: ns },
  ]);
  // Nothing else grants anything.
  assert.deepEqual(
    objects
      .filter((o) => /Role(Binding)?$/.test(o.kind))
      .map((o) => o.kind)
      .sort(),
    ["ClusterRole", "ClusterRoleBinding", "ClusterRoleBinding", "Role", "RoleBinding"],
  );
}

function checkNetworkPolicies(objects: Obj[], port: number): void {
  const { server, controller } = deployments(objects);
  const policies = objects.filter((o) => o.kind === "NetworkPolicy");
  const forServer = policies.find((p) => podMatches(p.spec.podSelector.matchLabels, server)) as Obj;
  assert.ok(forServer, "a NetworkPolicy selects the service's pods");
  assert.deepEqual(forServer.spec.policyTypes, ["Ingress", "Egress"]);
  assert.ok(forServer.spec.ingress.length >= 1);
  for (const rule of forServer.spec.ingress) assert.deepEqual(rule.ports, [{ protocol: "TCP", port }]);
  const egressPorts = forServer.spec.egress.flatMap((r: Obj) =>
    r.ports.map((p: Obj) => `${p.protocol}/${p.port}`),
  );
  for (const needed of ["UDP/53", "TCP/53", "TCP/443"])
    assert.ok(egressPorts.includes(needed), `egress ${needed}`);
  for (const rule of forServer.spec.egress)
    assert.ok(rule.ports?.length, "every egress rule names its ports");
  if (controller) {
    const forController = policies.find((p) => podMatches(p.spec.podSelector.matchLabels, controller)) as Obj;
    assert.ok(forController, "a NetworkPolicy selects the controller's pod");
    assert.deepEqual(forController.spec.policyTypes, ["Ingress", "Egress"]);
    const toService = forController.spec.egress.find((r: Obj) =>
      r.to?.some((t: Obj) => t.podSelector && podMatches(t.podSelector.matchLabels, server)),
    );
    assert.deepEqual(
      toService?.ports,
      [{ protocol: "TCP", port }],
      "the controller may reach the service port",
    );
    assert.ok(!podMatches(forServer.spec.podSelector.matchLabels, controller), "policies do not overlap");
  }
}

// ---------------------------------------------------------------- the API server

class DryRunApi extends KubernetesObjectApi {
  /**
   * Sends the object exactly as rendered. (KubernetesObjectApi.create re-serializes known kinds
   * through the client's models, which would drop a misspelt or unknown field before the API
   * server could refuse it.) fieldValidation=Strict makes an unknown or duplicate field an error.
   */
  async send(method: "POST" | "PATCH" | "GET", spec: Obj, query: Record<string, string>): Promise<Obj> {
    const path = await this.specUriPath(spec as KubernetesObject, method === "POST" ? "create" : "read");
    const ctx = this.configuration.baseServer.makeRequestContext(
      path,
      method === "POST" ? HttpMethod.POST : method === "PATCH" ? HttpMethod.PATCH : HttpMethod.GET,
    );
    ctx.setHeaderParam("Accept", "application/json");
    for (const [k, v] of Object.entries(query)) ctx.setQueryParam(k, v);
    if (method !== "GET") {
      ctx.setHeaderParam(
        "Content-Type",
        method === "PATCH" ? "application/apply-patch+yaml" : "application/json",
      );
      ctx.setBody(JSON.stringify(spec));
    }
    return (await this.requestPromise(ctx)) as Obj;
  }
  static forConfig(kc: KubeConfig): DryRunApi {
    const client = kc.makeApiClient(DryRunApi);
    client.setDefaultNamespace(kc);
    return client;
  }
  dryRunCreate(spec: Obj): Promise<Obj> {
    return this.send("POST", spec, { dryRun: "All", fieldManager: FIELD_MANAGER, fieldValidation: "Strict" });
  }
  /** Server-side apply, for real (the CRDs). */
  apply(spec: Obj): Promise<Obj> {
    return this.send("PATCH", spec, {
      fieldManager: FIELD_MANAGER,
      force: "true",
      fieldValidation: "Strict",
    });
  }
  get(spec: Obj): Promise<Obj> {
    return this.send("GET", spec, {});
  }
}

let api: DryRunApi;
/** Any CA certificate: the rendered configuration's caFile must hold one (its key was discarded). */
const caPem = readFileSync(join(ROOT, "test", "fixtures", "helm", "ca.crt"), "utf8");

/** The admin of the kube peer (a static token in system:masters). */
function kubeConfig(namespace?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: "peer",
        server: peer("KUBE_SERVER"),
        caData: readFileSync(peer("KUBE_CA_FILE")).toString("base64"),
      },
    ],
    users: [{ name: "admin", token: peer("KUBE_ADMIN_TOKEN") }],
    contexts: [{ name: "peer", cluster: "peer", user: "admin", ...(namespace ? { namespace } : {}) }],
    currentContext: "peer",
  });
  return kc;
}

async function dryRunAll(objects: Obj[]): Promise<void> {
  for (const o of objects) {
    try {
      const answer = await api.dryRunCreate(o);
      assert.equal(answer.kind, o.kind);
      assert.equal(answer.metadata?.name, o.metadata?.name);
    } catch (err) {
      assert.fail(`dry run of ${o.kind} ${o.metadata?.name} refused: ${(err as Error).message}`);
    }
  }
}

function crdFiles(): Obj[] {
  const crdDir = join(CHART, "crds");
  return readdirSync(crdDir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()
    .flatMap((f) => parseAll(readFileSync(join(crdDir, f), "utf8")));
}

async function installCrd(crd: Obj): Promise<void> {
  await api.apply(crd);
  await until(`CRD ${crd.metadata.name} established`, async () => {
    const live = await api.get(crd);
    return (live.status?.conditions ?? []).some((c: Obj) => c.type === "Established" && c.status === "True");
  });
}

/** The YAML code blocks of docs/cluster-api.md, as objects. */
function docExamples(): Obj[] {
  const text = readFileSync(join(ROOT, "docs", "cluster-api.md"), "utf8");
  const blocks = [...text.matchAll(/^```yaml\n([\s\S]*?)^```/gm)].map((m) => m[1] as string);
  return blocks.flatMap((b) => parseAll(b)).filter((o) => typeof o.kind === "string");
}

// ---------------------------------------------------------------- the tests

describe("the chart itself", () => {
  test("Chart.yaml: apiVersion v2, appVersion is package.json's version", () => {
    const chart = parseYaml(readFileSync(join(CHART, "Chart.yaml"), "utf8"));
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    assert.equal(chart.apiVersion, "v2");
    assert.equal(chart.name, "bootseal");
    assert.equal(chart.appVersion, pkg.version);
  });

  test("helm lint --strict passes with the default values (and publicUrl) and with every feature on", async () => {
    for (const [name, values] of [
      ["lint-minimal", MINIMAL],
      ["lint-s3", ALL_S3],
      ["lint-gcs", ALL_GCS],
    ] as const) {
      await helm([
        "lint",
        "--strict",
        CHART,
        "--kube-version",
        KUBE_VERSION,
        "--values",
        valuesFile(name, values),
      ]);
    }
  });

  test("values.schema.json refuses a file:// store, an unknown key, a bad scope, trustProxy true, a bad cap", async () => {
    const cases: [object, RegExp][] = [
      [{ store: { url: "file:///data" } }, /store\.url|store/],
      [{ replicas: 2 }, /replicas/],
      [{ controller: { scopes: ["configs:write", "root"] } }, /scopes/],
      [{ ...MINIMAL, trustProxy: true }, /trustProxy/],
      [{ ...MINIMAL, trustProxy: ["10.0.0.0/8", "ingress.example.com"] }, /trustProxy/],
      [{ ...MINIMAL, limits: { maxConnectionsPerAddress: -1 } }, /maxConnectionsPerAddress/],
      [{ ...MINIMAL, service: { externalTrafficPolicy: "local" } }, /externalTrafficPolicy/],
    ];
    for (const [i, [values, message]] of cases.entries()) {
      assert.match(await templateRefused(values, `bad-${i}`), message);
    }
  });

  test("config.existingSecret and config.inline together are refused", async () => {
    const values = {
      ...MINIMAL,
      config: { existingSecret: "x", inline: { creation_rules: [{ age: RECIPIENT }] } },
    };
    assert.match(
      await templateRefused(values, "both-configs"),
      /config\.existingSecret or config\.inline, not both/,
    );
  });

  test("publicUrl is required, with a message that says what it is", async () => {
    for (const [name, values] of [
      ["no-public-url", {}],
      ["no-public-url-secret", { config: { existingSecret: "bootseal-config" } }],
    ] as const) {
      assert.match(
        await templateRefused(values, name),
        /publicUrl is required: the URL machines reach the service at .*Host header/,
      );
    }
  });
});

describe("helm template, default values (and publicUrl)", () => {
  let objects: Obj[] = [];
  before(async () => {
    objects = await render(MINIMAL, "minimal");
  });

  test("two service replicas, hardened pods, probes, PDB, Service, ServiceAccounts", () => {
    const { server } = checkServerWiring(objects, { tls: false, audience: "bootseal" });
    assert.ok(server.spec.replicas >= 2, "two or more replicas by default");
    for (const d of objects.filter((o) => o.kind === "Deployment")) assertHardened(d);
    assert.equal(
      objects.filter((o) => o.kind === "ServiceMonitor").length,
      0,
      "no ServiceMonitor by default",
    );
  });

  test("the controller: one replica, leader election, its token for the service, least-privilege RBAC", () => {
    const cm = only(objects, "ConfigMap");
    checkController(objects, parseYaml(cm.data["bootseal.yaml"]), { tls: false, audience: "bootseal" });
  });

  test("NetworkPolicies: the service port in; DNS, store, KMS and API server out", () => {
    checkNetworkPolicies(
      objects,
      deployments(objects).server.spec.template.spec.containers[0].ports[0].containerPort,
    );
  });

  test("no credential in a ConfigMap or a plain env value", () => {
    assertNoSecretsInPlaintext(objects);
  });

  test("the rendered bootseal.yaml lacks only what the operator must give: store and creation_rules", () => {
    const cm = only(objects, "ConfigMap");
    const raw = localized(dir, parseYaml(cm.data["bootseal.yaml"]), caPem);
    assert.throws(() => validateServiceConfig(raw, dir), /store|creation_rules/);
    const completed = { ...raw, store: "s3://bootseal/configs", creation_rules: [{ age: RECIPIENT }] };
    const config = validateServiceConfig(completed, dir);
    assert.equal(config.controllerAuth.kubernetes?.server, "https://kubernetes.default.svc");
    assert.equal(config.kubernetesBindings.length, 1);
  });
});

describe("helm template, every feature on (S3, inline configuration)", () => {
  let objects: Obj[] = [];
  before(async () => {
    objects = await render(ALL_S3, "all-s3");
  });

  test("replicas, hardening, probes over HTTPS, PDB, ServiceMonitor", () => {
    const { server } = checkServerWiring(objects, { tls: true, audience: "bootseal-prod" });
    assert.equal(server.spec.replicas, 3);
    for (const d of objects.filter((o) => o.kind === "Deployment")) assertHardened(d);
    assert.equal(only(objects, "PodDisruptionBudget").spec.minAvailable, 2);
    const sm = only(objects, "ServiceMonitor");
    assert.equal(sm.apiVersion, "monitoring.coreos.com/v1");
    const serviceLabels = only(objects, "Service").metadata.labels as Record<string, string>;
    for (const [k, v] of Object.entries(sm.spec.selector.matchLabels))
      assert.equal(serviceLabels[k], v, `selects ${k}`);
    assert.deepEqual(sm.spec.namespaceSelector, { matchNames: [ns] });
    assert.deepEqual(
      sm.spec.endpoints.map((e: Obj) => [e.port, e.path, e.scheme]),
      [["http", "/metrics", "https"]],
    );
    assert.equal(sm.metadata.labels.release, "kube-prometheus-stack");
    assert.equal(
      server.spec.template.spec.containers[0].image,
      `registry.example.com/bootseal@sha256:${"ab".repeat(32)}`,
    );
  });

  test("the controller over TLS, with the chosen audience, namespaces and RBAC", () => {
    const cm = only(objects, "ConfigMap");
    const config = parseYaml(cm.data["bootseal.yaml"]);
    checkController(objects, config, {
      tls: true,
      audience: "bootseal-prod",
      infrastructureReadGroups: ["infrastructure.cluster.x-k8s.io"],
    });
    const account = `${ns}/${deployments(objects).controller?.spec.template.spec.serviceAccountName}`;
    assert.deepEqual(
      config.kubernetesBindings.map((b: Obj) => b.serviceAccount),
      [account, "team-a/capi-controller", "monitoring/*"],
      "the controller's binding, then values.kubernetesBindings, then config.inline's",
    );
    assert.deepEqual(config.kubernetesBindings[0].namespaces, ["cluster-*"]);
  });

  test("NetworkPolicies with the configured peers", () => {
    checkNetworkPolicies(objects, 7480);
    const policy = objects.find(
      (o) => o.kind === "NetworkPolicy" && !o.metadata.name.endsWith("-controller"),
    ) as Obj;
    assert.deepEqual(policy.spec.ingress[0].from[0], { ipBlock: { cidr: "10.0.0.0/8" } });
    assert.ok(
      policy.spec.egress.some((r: Obj) => r.to?.[0]?.ipBlock?.cidr === "10.30.0.0/16"),
      "extra egress",
    );
  });

  test("credentials only from the named Secrets, none in a ConfigMap", () => {
    assertNoSecretsInPlaintext(objects);
    const [c] = deployments(objects).server.spec.template.spec.containers;
    assert.deepEqual(c.envFrom, [
      { secretRef: { name: "bootseal-store" } },
      { secretRef: { name: "bootseal-kms" } },
    ]);
    const volumes = deployments(objects).server.spec.template.spec.volumes;
    const secrets = volumes
      .filter((v: Obj) => v.secret)
      .map((v: Obj) => v.secret.secretName)
      .sort();
    assert.deepEqual(secrets, ["bootseal-derivation-key", "bootseal-tls"]);
  });

  test("the rendered bootseal.yaml is a valid configuration for the service", () => {
    const cm = only(objects, "ConfigMap");
    const config = validateServiceConfig(localized(dir, parseYaml(cm.data["bootseal.yaml"]), caPem), dir);
    assert.equal(config.store, "s3://bootseal-configs/prod");
    assert.equal(config.publicUrl, "https://bootseal.mgmt.example.com");
    assert.ok(config.tls, "TLS on");
    assert.ok(config.bootstrapToken.derivationKey, "the derivation key file was read");
    assert.deepEqual(config.controllerAuth.kubernetes?.audiences, ["bootseal-prod"]);
    assert.equal(config.controllers.length, 1);
    assert.equal(config.kubernetesBindings.length, 3);
    // The chart owns the per-address cap (64: the Service hands the pods the machines' own
    // addresses) and trustProxy; the file's other limits stay.
    assert.deepEqual(config.trustProxy, ["10.244.0.0/16"]);
    assert.equal(config.limits.maxConnectionsPerAddress, 64);
    assert.equal(config.limits.maxConnections, 1024);
  });
});

describe("helm template, every feature on (GCS, configuration in an existing Secret)", () => {
  let objects: Obj[] = [];
  before(async () => {
    objects = await render(ALL_GCS, "all-gcs");
  });

  test("no ConfigMap; the Secret is mounted; the chart's keys come as BOOTSEAL_* variables", () => {
    assert.equal(objects.filter((o) => o.kind === "ConfigMap").length, 0);
    const { server } = checkServerWiring(objects, { tls: true, audience: "bootseal" });
    for (const d of objects.filter((o) => o.kind === "Deployment")) assertHardened(d);
    assertNoSecretsInPlaintext(objects);
    const pod = server.spec.template.spec;
    const config = pod.volumes.find((v: Obj) => v.name === "config");
    assert.equal(config.secret.secretName, "bootseal-config");
    assert.deepEqual(config.secret.items, [{ key: "config.yaml", path: "bootseal.yaml" }]);
    const [c] = pod.containers;
    const env = Object.fromEntries(c.env.filter((e: Obj) => "value" in e).map((e: Obj) => [e.name, e.value]));
    assert.equal(env.BOOTSEAL_STORE, "gs://bootseal-configs/prod");
    const credentials = pod.volumes.find((v: Obj) => v.secret?.secretName === "bootseal-gcs");
    assert.deepEqual(credentials.secret.items, [{ key: "sa.json", path: "credentials.json" }]);
    const mount = c.volumeMounts.find((m: Obj) => m.name === credentials.name);
    assert.equal(env.GOOGLE_APPLICATION_CREDENTIALS, join(mount.mountPath, "credentials.json"));
    assert.equal(c.envFrom, undefined, "no envFrom: GCS credentials are a file");

    // The operator's Secret holds the rest; with the chart's variables it is a valid configuration.
    const secretConfig = { creation_rules: [{ gcp_kms: "projects/p/locations/l/keyRings/r/cryptoKeys/k" }] };
    const merged = validateServiceConfig(localized(dir, applyEnv(secretConfig, env), caPem), dir);
    assert.equal(merged.store, "gs://bootseal-configs/prod");
    assert.ok(merged.tls && merged.bootstrapToken.derivationKey);
    checkController(objects, applyEnv({}, env), { tls: true, audience: "bootseal" });
  });

  test("the controller watches one namespace", () => {
    const [c] = (deployments(objects).controller as Obj).spec.template.spec.containers;
    assert.equal(c.args[c.args.indexOf("--namespace") + 1], "team-a");
  });
});

describe("helm template, behind a balancer: trustProxy and the per-address cap", () => {
  /** The service's own reading of what the chart renders for these values (either source). */
  async function served(values: Obj, name: string): Promise<{ objects: Obj[]; config: Obj }> {
    const objects = await render({ ...MINIMAL, ...values }, name);
    const base = { store: "s3://bootseal/configs", creation_rules: [{ age: RECIPIENT }] };
    if (values.config?.existingSecret) {
      const [c] = deployments(objects).server.spec.template.spec.containers;
      const env = Object.fromEntries(
        c.env.filter((e: Obj) => "value" in e).map((e: Obj) => [e.name, e.value]),
      );
      return { objects, config: validateServiceConfig(localized(dir, applyEnv(base, env), caPem), dir) };
    }
    const raw = parseYaml(only(objects, "ConfigMap").data["bootseal.yaml"]);
    return { objects, config: validateServiceConfig(localized(dir, { ...base, ...raw }, caPem), dir) };
  }

  test("the cap is off wherever the pods see balancer hops, 64 where they see each machine", async () => {
    const cases: [string, Obj, number, string | undefined][] = [
      ["clusterip", {}, 0, undefined],
      ["lb-cluster", { service: { type: "LoadBalancer" } }, 0, undefined],
      [
        "lb-cluster-explicit",
        { service: { type: "LoadBalancer", externalTrafficPolicy: "Cluster" } },
        0,
        "Cluster",
      ],
      ["lb-local", { service: { type: "LoadBalancer", externalTrafficPolicy: "Local" } }, 64, "Local"],
      ["nodeport-local", { service: { type: "NodePort", externalTrafficPolicy: "Local" } }, 64, "Local"],
      // ClusterIP has no external traffic: the field is not rendered (the API refuses it there).
      ["clusterip-local", { service: { externalTrafficPolicy: "Local" } }, 0, undefined],
      [
        "explicit",
        { service: { type: "LoadBalancer" }, limits: { maxConnectionsPerAddress: 128 } },
        128,
        undefined,
      ],
      [
        "secret-local",
        {
          config: { existingSecret: "bootseal-config" },
          service: { type: "LoadBalancer", externalTrafficPolicy: "Local" },
        },
        64,
        "Local",
      ],
      ["secret-clusterip", { config: { existingSecret: "bootseal-config" } }, 0, undefined],
    ];
    for (const [name, values, cap, policy] of cases) {
      const { objects, config } = await served(values, `cap-${name}`);
      assert.equal(config.limits.maxConnectionsPerAddress, cap, `${name}: the per-address cap`);
      assert.equal(config.trustProxy, false, `${name}: no X-Forwarded-For believed by default`);
      assert.equal(
        only(objects, "Service").spec.externalTrafficPolicy,
        policy,
        `${name}: the Service's policy`,
      );
    }
  });

  test("trustProxy reaches the service as a list, from the ConfigMap and as BOOTSEAL_TRUST_PROXY", async () => {
    const trustProxy = ["10.244.0.0/16", "fd00:10:244::/56"];
    for (const [name, values] of [
      ["inline", { trustProxy, config: { inline: { trustProxy: true } } }],
      ["secret", { trustProxy, config: { existingSecret: "bootseal-config" } }],
    ] as const) {
      const { config } = await served(values, `trust-${name}`);
      assert.deepEqual(config.trustProxy, trustProxy, `${name}: the chart's list replaces the file's`);
    }
  });
});

describe("helm template, the service alone", () => {
  test("controller.enabled=false: no controller, no ClusterRole; the service still reviews tokens", async () => {
    const objects = await render(
      {
        ...MINIMAL,
        controller: { enabled: false },
        kubernetesBindings: [{ serviceAccount: "team-a/*", scopes: ["status:read"] }],
      },
      "no-controller",
    );
    assert.equal(deployments(objects).controller, undefined);
    assert.deepEqual(
      objects.filter((o) => /^(ClusterRole|Role|RoleBinding)$/.test(o.kind)),
      [],
    );
    const config = parseYaml(only(objects, "ConfigMap").data["bootseal.yaml"]);
    assert.deepEqual(config.kubernetesBindings, [{ serviceAccount: "team-a/*", scopes: ["status:read"] }]);
    checkNetworkPolicies(objects, 7480);
    assertNoSecretsInPlaintext(objects);
  });

  test("controller.enabled without controllerAuth.kubernetes is refused with a reason", async () => {
    const stderr = await templateRefused(
      { ...MINIMAL, controllerAuth: { kubernetes: { enabled: false } } },
      "no-review",
    );
    assert.match(stderr, /controller\.enabled needs controllerAuth\.kubernetes\.enabled/);
  });
});

describe("against the real API server", () => {
  before(async () => {
    api = DryRunApi.forConfig(kubeConfig(ns));
    await kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: ns } } });
  });

  after(async () => {
    // The namespace only; the CRDs stay (other tests of this API server may use them, and a later
    // run applies them again). Without a controller manager the namespace stays Terminating.
    await kubeConfig().makeApiClient(CoreV1Api).deleteNamespace({ name: ns });
  });

  test("the API server is the version the chart is rendered for", async () => {
    assert.equal((await kubeConfig().makeApiClient(VersionApi).getCode()).gitVersion, KUBE_VERSION);
  });

  test("the CRDs in crds/ install, are established, and carry Cluster API's contract label", async () => {
    const crds = crdFiles();
    const names = crds.map((c) => [c.kind, c.metadata.name, c.spec.group, c.spec.names.kind, c.spec.scope]);
    for (const [name, kind] of [
      ["bootsealconfigs.bootstrap.bootseal.dev", "BootsealConfig"],
      ["bootsealconfigtemplates.bootstrap.bootseal.dev", "BootsealConfigTemplate"],
    ]) {
      assert.ok(
        names.some(
          (n) => n.join(" ") === `CustomResourceDefinition ${name} bootstrap.bootseal.dev ${kind} Namespaced`,
        ),
        `crds/ defines ${kind} (${name}), namespaced`,
      );
    }
    for (const crd of crds) {
      assert.equal(
        crd.metadata.labels?.["cluster.x-k8s.io/v1beta2"],
        "v1alpha1",
        `${crd.metadata.name}: contract label`,
      );
      await installCrd(crd);
    }
    const served = await api.get({
      apiVersion: "apiextensions.k8s.io/v1",
      kind: "CustomResourceDefinition",
      metadata: { name: "bootsealconfigs.bootstrap.bootseal.dev" },
    });
    assert.deepEqual(served.status.acceptedNames.shortNames, ["bsc"]);
  });

  test("every rendered object passes a strict server-side dry run (default values and every feature on)", async () => {
    const serviceMonitorCrd = parseAll(
      readFileSync(
        join(ROOT, "test", "fixtures", "helm", "servicemonitors.monitoring.coreos.com.yaml"),
        "utf8",
      ),
    );
    for (const crd of serviceMonitorCrd) await installCrd(crd);
    for (const [name, values] of [
      ["default", MINIMAL],
      ["all-s3", ALL_S3],
      ["all-gcs", ALL_GCS],
    ] as const) {
      const objects = await render(values, `dry-${name}`);
      assert.ok(objects.length >= 12, `${name}: ${objects.length} objects`);
      await dryRunAll(objects);
    }
  });

  test("a field the API does not know is refused (the dry run really checks)", async () => {
    const objects = await render(MINIMAL, "minimal-unknown-field");
    const d = structuredClone(deployments(objects).server);
    d.spec.template.spec.containers[0].securityContext.readOnlyRootFileSystem = true;
    await assert.rejects(api.dryRunCreate(d), (err: Error & { code?: number }) => {
      assert.equal(err.code, 400);
      assert.match(err.message, /unknown field.*readOnlyRootFileSystem/);
      return true;
    });
  });

  test("docs/cluster-api.md's BootsealConfig and BootsealConfigTemplate dry-run against the installed CRDs", async () => {
    for (const crd of crdFiles()) await installCrd(crd);
    const examples = docExamples().filter((o) => o.apiVersion?.startsWith("bootstrap.bootseal.dev/"));
    const kinds = examples.map((o) => o.kind);
    assert.ok(kinds.includes("BootsealConfig"), "the doc has a BootsealConfig");
    assert.ok(kinds.includes("BootsealConfigTemplate"), "the doc has a BootsealConfigTemplate");
    for (const o of examples) o.metadata = { ...o.metadata, namespace: ns };
    await dryRunAll(examples);
    const bad = { ...structuredClone(examples[0] as Obj), spec: "not an object" };
    await assert.rejects(api.dryRunCreate(bad), { code: 422 });
  });
});
