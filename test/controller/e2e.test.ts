/**
 * `bootseal controller` end to end against the real Cluster API (v1.14, the capi peer): its core
 * manager and kubeadm bootstrap provider reconcile the Clusters, Machines and inner
 * KubeadmConfigs here, against the kube peer's kube-apiserver; a real `bootseal serve` holds the
 * configs; the test plays only the infrastructure provider and the kubelet
 * (test/controller/capi-world.ts). These are the controller's own cases (the service down, a
 * restart, tokens); test/controller/capi-real.test.ts covers Cluster API's side of the contract.
 * Each test has its own namespace and Cluster (the controller watches only that namespace).
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { E2EService } from "../e2e/service.ts";
import type { AgeKey } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { until } from "../helpers/until.ts";
import {
  bootMachine,
  type ControllerWorld,
  controllerWorld,
  createRealCluster,
  createRealMachine,
  deleteNodes,
  getKubeadmConfig,
  getMachine,
  initialiseControlPlane,
  innerData,
  joinSpec,
  nodeName,
} from "./capi-world.ts";
import {
  type Any,
  BSC,
  CAPI,
  type ControllerProcess,
  condition,
  core,
  custom,
  getConfig,
  KUBEADM,
  MERGE,
  namespace,
  relay,
  runCloudInitStub,
  secret,
  startController,
  waitConfig,
} from "./harness.ts";

let world: ControllerWorld;
let dir: string;
let key: AgeKey;
let service: E2EService;
let kubeconfig: string;
const TENANT_TOKEN = randomBytes(24).toString("hex");
// The controller's own ServiceAccount (in a namespace of its own) and the audience its
// projected token is bound to: the service reviews it with TokenReview on the kube peer.
const SA_HOME = `ctl-sa-home-${randomBytes(4).toString("hex")}`;
const SA_AUDIENCE = "bootseal-e2e";

before(async () => {
  await core().createNamespace({ body: { metadata: { name: SA_HOME } } });
  await core().createNamespacedServiceAccount({
    namespace: SA_HOME,
    body: { metadata: { name: "bootseal-controller" } },
  });
  world = await controllerWorld("controller-e2e", async (d) => {
    // The reviewer's credential: the peer's admin token (system:masters may create TokenReviews).
    const reviewerToken = join(d, "reviewer-token");
    await writeFile(reviewerToken, peer("KUBE_ADMIN_TOKEN"), { mode: 0o600 });
    return {
      controllers: [
        {
          name: "tenant-a",
          token: TENANT_TOKEN,
          scopes: ["configs:write", "tokens:mint", "status:read"],
          namespaces: ["ctl-tenant-a-*"],
        },
      ],
      configLines: [
        "controllerAuth:",
        "  kubernetes:",
        `    server: ${peer("KUBE_SERVER")}`,
        `    caFile: ${peer("KUBE_CA_FILE")}`,
        `    tokenFile: ${reviewerToken}`,
        `    audiences: [${SA_AUDIENCE}]`,
        "kubernetesBindings:",
        `  - serviceAccount: ${SA_HOME}/bootseal-controller`,
        "    scopes: [configs:write, tokens:mint, status:read]",
        '    namespaces: ["ctl-sa-m-*"]',
      ],
    };
  });
  ({ dir, key, service, kubeconfig } = world);
});
after(async () => {
  await core()
    .deleteNamespace({ name: SA_HOME })
    .catch(() => {});
  await world?.close();
});

const controllerArgs = (ns: string, server = service.url) => [
  "--server",
  server,
  "--token-file",
  service.controllerTokenFile,
  "--kubeconfig",
  kubeconfig,
  "--namespace",
  ns,
  "--concurrency",
  "2",
];

const statusOf = async (machine: string): Promise<Any> => {
  const res = await service.get(`/v1/machines/${machine}/status`);
  return res.status === 404 ? null : res.json();
};

interface ControllerRun {
  readonly ns: string;
  /** The controller now running (a restart replaces it). */
  readonly ctl: ControllerProcess;
  /** kill -9 of the running controller, then a new one with the same arguments. */
  restart(): Promise<ControllerProcess>;
}

/**
 * Every test's set-up: a namespace of its own (`prefix-…`) with Cluster `c1` in it, its control
 * plane initialised by the kubeadm provider without bootseal (`initialiseControlPlane`, so that
 * workers get join data whatever the controller under test can do; `controlPlane: false`: none,
 * and the provider writes no join data), and a controller watching the namespace (`server`: the
 * service by default; `tokenFile(ns)`: a token file of the test's instead of the service's
 * controller token). After `body`, the controller stops (with `exitsZero` it must exit 0 on
 * SIGTERM) and the namespace's Nodes go.
 */
async function withController(
  prefix: string,
  options: {
    readonly controlPlane?: boolean;
    readonly server?: string;
    readonly tokenFile?: (ns: string) => Promise<string>;
    readonly exitsZero?: boolean;
  },
  body: (run: ControllerRun) => Promise<void>,
): Promise<void> {
  const ns = await namespace(prefix);
  await createRealCluster(ns, "c1");
  if (options.controlPlane !== false) await initialiseControlPlane(ns, "c1", "kubeadm");
  const args = controllerArgs(ns, options.server);
  if (options.tokenFile) args[args.indexOf("--token-file") + 1] = await options.tokenFile(ns);
  let ctl = startController(args);
  const run: ControllerRun = {
    ns,
    get ctl() {
      return ctl;
    },
    async restart() {
      await ctl.kill9();
      ctl = startController(args);
      return ctl;
    },
  };
  try {
    await body(run);
  } finally {
    const code = await ctl.stop();
    await deleteNodes(ns, ["cp-0", "worker-1"]);
    if (options.exitsZero) assert.equal(code, 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
  }
}

/**
 * A worker Machine of Cluster `c1` whose BootsealConfig wraps a kubeadm join (`bootseal`: more of
 * the BootsealConfig's spec; `inner`: more of the KubeadmConfig's).
 */
const createWorker = (
  ns: string,
  name: string,
  more: { bootseal?: Record<string, unknown>; inner?: Record<string, unknown> } = {},
) => createRealMachine(ns, "c1", { name, bootseal: { ...joinSpec(name, more.inner), ...more.bootseal } });

/**
 * Deletes Machine `name` and waits until Cluster API has removed it: Cluster API deletes its
 * BootsealConfig too, which goes only once the controller has deleted the machine's config at the
 * service and released its finalizer (the log line says so, with why: the Machine or the
 * BootsealConfig being deleted, whichever it saw first).
 */
async function deleteMachine(ns: string, name: string, ctl: ControllerProcess): Promise<void> {
  await custom().deleteNamespacedCustomObject({ ...CAPI, namespace: ns, plural: "machines", name });
  const gone = (get: Promise<unknown>) =>
    get.then(
      () => false,
      () => true,
    );
  await until(`Machine ${name} gone`, () => gone(getMachine(ns, name)), { tries: 1200 });
  assert.ok(await gone(getConfig(ns, name)), `Cluster API deleted BootsealConfig ${name}`);
  const released = ctl
    .log()
    .split("\n")
    .find((l) => l.includes(`"bootsealConfig":"${ns}/${name}"`) && l.includes("released the finalizer"));
  assert.match(released ?? "", /"why":"(Machine \S+ is deleted|the BootsealConfig is being deleted)"/);
}

test(
  "Cluster + Machine + BootsealConfig → the kubeadm provider's join data → published → stub in the data secret (cloud-init schema, ignition-validate) → bootseal fetch → succeeded → nodeRef (set by Cluster API) and Machine deletion clean up",
  {
    timeout: 600_000,
  },
  () =>
    withController("ctl-e2e", { exitsZero: true }, async ({ ns, ctl }) => {
      await createWorker(ns, "worker-0", { bootseal: { payload: "cloud-config" } });
      // An Ignition machine: the kubeadm provider renders Ignition (spec 2.3.0), the stub is Ignition too.
      await createWorker(ns, "worker-1", {
        bootseal: { userDataFormat: "ignition", payload: "ignition" },
        inner: { format: "ignition" },
      });
      const w0 = await waitConfig(ns, "worker-0", "worker-0 ready", (o) => o.status?.ready === true);
      assert.equal(w0.status.dataSecretName, "worker-0-bootseal");
      assert.equal(w0.status.initialization.dataSecretCreated, true);
      assert.deepEqual(w0.status.innerRef, {
        apiVersion: "bootstrap.cluster.x-k8s.io/v1beta2",
        kind: "KubeadmConfig",
        name: "worker-0-inner",
      });
      for (const t of ["Ready", "DataSecretAvailable", "InnerConfigReady", "Published"])
        assert.equal(condition(w0, t)?.status, "True", `${t}: ${JSON.stringify(condition(w0, t))}`);
      assert.equal(w0.metadata.finalizers.includes("bootstrap.bootseal.dev/config"), true);
      assert.equal(w0.metadata.annotations["bootstrap.bootseal.dev/published-version"], "1");
      // The publish named its Cluster API objects: the service keeps them (the fleet page shows them).
      assert.deepEqual((await statusOf(`${ns}/worker-0`))?.config?.capi, {
        cluster: (await getMachine(ns, "worker-0")).spec.clusterName,
        machine: "worker-0",
        bootsealConfig: w0.metadata.name,
      });
      assert.deepEqual(
        w0.metadata.ownerReferences.map((r: Any) => [r.kind, r.name]),
        [["Machine", "worker-0"]],
        "Cluster API set the owner",
      );
      await until(
        "Cluster API names bootseal's data secret on the Machine",
        async () => (await getMachine(ns, "worker-0")).spec.bootstrap.dataSecretName === "worker-0-bootseal",
        { tries: 600 },
      );

      // The inner config: owned by the BootsealConfig (controller) and the Machine, labelled with
      // the cluster and the watch filter (so the kubeadm provider sees it).
      const inner: Any = await getKubeadmConfig(ns, "worker-0-inner");
      assert.equal(inner.metadata.labels["cluster.x-k8s.io/cluster-name"], "c1");
      assert.equal(inner.metadata.labels["cluster.x-k8s.io/watch-filter"], peer("CAPI_WATCH_FILTER"));
      assert.deepEqual(
        inner.metadata.ownerReferences.map((r: Any) => [r.kind, r.name, r.controller === true]),
        [
          ["BootsealConfig", "worker-0", true],
          ["Machine", "worker-0", false],
        ],
      );
      assert.equal(inner.spec.joinConfiguration.nodeRegistration.name, "worker-0");
      // The kubeadm provider wrote the join data (with the bootstrap token it put into the spec).
      const joinToken: string = inner.spec.joinConfiguration.discovery.bootstrapToken.token;
      const joinData = (await innerData(ns, "worker-0-inner")).toString();
      assert.match(joinData, /kubeadm join/);
      assert.ok(joinData.includes(joinToken), "the join data carries the bootstrap token");
      // worker-1's inner config is reconciled on its own: it may be written after worker-0 is ready.
      const w1 = await waitConfig(ns, "worker-1", "worker-1 ready", (o) => o.status?.ready === true);
      const ignitionData = JSON.parse((await innerData(ns, "worker-1-inner")).toString());
      assert.equal(ignitionData.ignition.version, "2.3.0", "the kubeadm provider's Ignition");

      // The data secret, as the contract wants it, holding exactly the service's stub.
      const ds = await secret(ns, "worker-0-bootseal");
      assert.equal(ds.type, "cluster.x-k8s.io/secret");
      assert.equal(ds.metadata.labels["cluster.x-k8s.io/cluster-name"], "c1");
      assert.deepEqual(
        ds.metadata.ownerReferences.map((r: Any) => [r.apiVersion, r.kind, r.name, r.controller]),
        [["bootstrap.bootseal.dev/v1alpha1", "BootsealConfig", "worker-0", true]],
      );
      assert.deepEqual(Object.keys(ds.data).sort(), ["format", "value"]);
      assert.equal(Buffer.from(ds.data.format, "base64").toString(), "cloud-config");
      const stub = Buffer.from(ds.data.value, "base64").toString();
      const fromService = await (
        await service.get(`/v1/machines/${ns}/worker-0/userdata?format=cloud-init`)
      ).text();
      assert.equal(stub, fromService, "the data secret holds the service's stable stub");
      assert.ok(stub.startsWith("#cloud-config\n"));
      assert.ok(!stub.includes(joinToken), "the stub carries no bootstrap data");
      const stubFile = join(dir, `${ns}-worker-0.yaml`);
      await writeFile(stubFile, stub);
      const schema = spawnSync(peer("CLOUD_INIT_BIN"), ["schema", "--config-file", stubFile], {
        encoding: "utf8",
      });
      assert.equal(schema.status, 0, schema.stdout + schema.stderr);
      assert.match(schema.stdout + schema.stderr, /Valid cloud-config/);

      const ds1 = await secret(ns, w1.status.dataSecretName);
      assert.equal(Buffer.from(ds1.data.format, "base64").toString(), "ignition");
      const ign = join(dir, `${ns}-worker-1.ign`);
      await writeFile(ign, Buffer.from(ds1.data.value, "base64"));
      const v = spawnSync(peer("IGNITION_VALIDATE_BIN"), [ign], { encoding: "utf8" });
      assert.equal(v.status, 0, v.stdout + v.stderr);
      assert.equal(JSON.parse(await readFile(ign, "utf8")).ignition.version, "3.0.0");

      // The machine boots: the stub's unit runs bootseal fetch, which runs the provider's commands
      // (with the machine's own /run) and reports its phases.
      const root = join(dir, `${ns}-root`);
      const r = await runCloudInitStub(stub, root, {
        ageKeyFile: key.file,
        kubeadmExit: 0,
        privateRun: true,
      });
      assert.equal(r.code, 0, r.stderr);
      assert.match(
        await readFile(join(root, "kubeadm.args"), "utf8"),
        /^join\n--config\n\/run\/kubeadm\/kubeadm-join-config\.yaml\n/,
      );
      assert.match(
        await readFile(join(root, "run/kubeadm/kubeadm-join-config.yaml"), "utf8"),
        /name: worker-0/,
      );
      assert.equal(
        (await readFile(join(root, "run/cluster-api/bootstrap-success.complete"), "utf8")).trim(),
        "success",
        "the provider's sentinel",
      );
      const done = await waitConfig(
        ns,
        "worker-0",
        "succeeded on worker-0",
        (o) => o.status?.phase === "succeeded",
      );
      assert.deepEqual(
        [condition(done, "MachineBootstrapped").status, condition(done, "MachineBootstrapped").reason],
        ["True", "Succeeded"],
      );

      // worker-1 boots without fetching (its kubelet registers): Cluster API sets the Machine's
      // nodeRef and the config is deleted from bootseal.
      assert.equal((await service.get(`/v1/machines/${ns}/worker-1/config`)).status, 200);
      await bootMachine(ns, "worker-1");
      await until(
        "Cluster API set worker-1's nodeRef",
        async () => (await getMachine(ns, "worker-1")).status?.nodeRef?.name === nodeName(ns, "worker-1"),
        { tries: 1200 },
      );
      await waitConfig(
        ns,
        "worker-1",
        "config-deleted on worker-1",
        (o) => condition(o, "Published")?.reason === "ConfigDeleted",
      );
      assert.equal((await service.get(`/v1/machines/${ns}/worker-1/config`)).status, 404);

      // A third machine, published and never fetched, is deleted: its config goes from the store.
      await createWorker(ns, "worker-2");
      await waitConfig(ns, "worker-2", "worker-2 ready", (o) => o.status?.ready === true);
      assert.equal((await service.get(`/v1/machines/${ns}/worker-2/config`)).status, 200);
      for (const m of ["worker-0", "worker-2"]) {
        await deleteMachine(ns, m, ctl);
        assert.equal((await service.get(`/v1/machines/${ns}/${m}/config`)).status, 404);
      }
      assert.equal((await statusOf(`${ns}/worker-2`)).published, false);
      assert.equal(ctl.process.exitCode, null);
      assert.ok(!ctl.log().includes(joinToken), "no payload in the controller's log");
      assert.ok(!ctl.log().includes(service.controllerToken), "no token in the controller's log");
      assert.ok(!ctl.log().includes("bst."), "no bootstrap token in the controller's log");
    }),
);

test("the service down while the controller reconciles: Published=False ServiceUnavailable, retries with backoff, recovers", {
  timeout: 300_000,
}, async () => {
  const gate = await relay(new URL(service.url));
  await gate.down();
  try {
    await withController("ctl-down", { server: gate.url }, async ({ ns, ctl }) => {
      await createWorker(ns, "m-0");
      const down = await waitConfig(
        ns,
        "m-0",
        "ServiceUnavailable",
        (o) => condition(o, "Published")?.reason === "ServiceUnavailable",
      );
      assert.equal(condition(down, "Published").status, "False");
      assert.match(condition(down, "Published").message, /publish: .*no answer/);
      assert.equal(condition(down, "Ready").status, "False");
      assert.notEqual(down.status.ready, true);
      assert.equal(await statusOf(`${ns}/m-0`), null, "nothing reached the service");
      // It keeps trying (each attempt logs one line), and comes through once the service is back.
      await until("two retries", () => (ctl.log().match(/"what":"publish"/g) ?? []).length >= 2, {
        tries: 600,
      });
      await gate.up();
      const up = await waitConfig(ns, "m-0", "published after recovery", (o) => o.status?.ready === true);
      assert.equal(condition(up, "Published").status, "True");
      assert.equal((await statusOf(`${ns}/m-0`)).version, 1);
      assert.equal(ctl.process.exitCode, null);
    });
  } finally {
    await gate.close();
  }
});

test(
  "a Machine deleted before its data was ready: no publish, the finalizer is released",
  {
    timeout: 300_000,
  },
  () =>
    // No control plane: the kubeadm provider writes no join data until one is initialised.
    withController("ctl-early", { controlPlane: false }, async ({ ns, ctl }) => {
      await createWorker(ns, "m-0");
      const waiting = await waitConfig(
        ns,
        "m-0",
        "waiting for the inner data",
        (o) =>
          condition(o, "InnerConfigReady")?.reason === "WaitingForDataSecret" &&
          (o.metadata.finalizers ?? []).length === 1,
      );
      assert.equal(waiting.status.ready, undefined);
      assert.deepEqual(
        waiting.metadata.ownerReferences.map((r: Any) => [r.kind, r.name]),
        [["Machine", "m-0"]],
        "Cluster API set the owner",
      );
      await deleteMachine(ns, "m-0", ctl);
      assert.equal(await statusOf(`${ns}/m-0`), null, "never published");
      // (No garbage collector runs here: the inner config stays, without data.)
      assert.equal((await getKubeadmConfig(ns, "m-0-inner")).status?.dataSecretName, undefined);
      assert.equal(
        await secret(ns, "m-0-inner").then(
          () => "exists",
          () => "absent",
        ),
        "absent",
        "the kubeadm provider wrote no data",
      );
    }),
);

test(
  "a controller restart in the middle: no republish, no second inner config or data secret",
  {
    timeout: 300_000,
  },
  () =>
    withController("ctl-restart", {}, async (run) => {
      const { ns } = run;
      await createWorker(ns, "m-0");
      const first = await waitConfig(ns, "m-0", "ready", (o) => o.status?.ready === true);
      const ds = await secret(ns, "m-0-bootseal");
      const ctl = await run.restart();
      // The new controller has listed and reconciled it (its first reconcile logs nothing new).
      await until("the new controller to start", () => ctl.log().includes("controller started"), {
        tries: 600,
      });
      const before = await statusOf(`${ns}/m-0`);
      // A change to the BootsealConfig is reconciled by the new process, and still nothing is republished.
      await custom().patchNamespacedCustomObject(
        {
          ...BSC,
          namespace: ns,
          name: "m-0",
          body: { metadata: { labels: { poke: "1" } } },
        },
        MERGE,
      );
      await until("a reconcile by the new controller", async () => {
        const o = await getConfig(ns, "m-0");
        return o.metadata.labels.poke === "1" && ctl.log().includes("controller started");
      });
      // Bounded look for any republish: the service's version stays 1 across the restart.
      await until("the phase polled again", async () => (await statusOf(`${ns}/m-0`)) !== null);
      assert.equal(before.version, 1);
      assert.equal((await statusOf(`${ns}/m-0`)).version, 1);
      assert.equal(before.history.filter((h: Any) => h.phase === "published").length, 1);
      assert.equal((await secret(ns, "m-0-bootseal")).metadata.resourceVersion, ds.metadata.resourceVersion);
      const again = await getConfig(ns, "m-0");
      assert.equal(again.metadata.annotations["bootstrap.bootseal.dev/published-version"], "1");
      assert.equal(
        again.metadata.annotations["bootstrap.bootseal.dev/published-sha256"],
        first.metadata.annotations["bootstrap.bootseal.dev/published-sha256"],
      );
      // (cp-0's KubeadmConfig is the control plane's own, not bootseal's.)
      const inners: Any = await custom().listNamespacedCustomObject({ ...KUBEADM, namespace: ns });
      assert.deepEqual(
        inners.items
          .filter((i: Any) =>
            (i.metadata.ownerReferences ?? []).some((r: Any) => r.kind === "BootsealConfig"),
          )
          .map((i: Any) => i.metadata.name),
        ["m-0-inner"],
      );
      assert.ok(!ctl.log().includes("published the inner bootstrap data"), ctl.log());
    }),
);

test("one tenant's controller (a namespace-limited token) cannot touch another namespace's machines: 403 is a condition, not a crash", {
  timeout: 300_000,
}, () => {
  const tokenFile = async (ns: string) => {
    const file = join(dir, `tenant-${ns}`);
    await writeFile(file, TENANT_TOKEN, { mode: 0o600 });
    return file;
  };
  return withController("ctl-tenant-b", { tokenFile, exitsZero: true }, async ({ ns, ctl }) => {
    await createWorker(ns, "m-0");
    const refused = await waitConfig(
      ns,
      "m-0",
      "Forbidden",
      (o) => condition(o, "Published")?.reason === "Forbidden",
    );
    assert.equal(condition(refused, "Published").status, "False");
    assert.match(condition(refused, "Published").message, /HTTP 403/);
    assert.notEqual(refused.status.ready, true);
    assert.equal(await statusOf(`${ns}/m-0`), null, "nothing published in the other tenant's namespace");
    await until("a retry after the 403", () => (ctl.log().match(/"reason":"Forbidden"/g) ?? []).length >= 2, {
      tries: 600,
    });
    assert.equal(ctl.process.exitCode, null, "still running");
  });
});

test("the controller signs in with its ServiceAccount token (TokenRequest for the service's audience, reviewed by the service with TokenReview): published and ready; a token for another audience is refused", {
  timeout: 300_000,
}, () => {
  const tokenFor = async (audience: string) =>
    (
      await core().createNamespacedServiceAccountToken({
        name: "bootseal-controller",
        namespace: SA_HOME,
        body: { spec: { audiences: [audience], expirationSeconds: 3600 } },
      })
    ).status?.token as string;
  let tokenFile = "";
  // First with a token bound to another audience: the service's review refuses it.
  const firstToken = async (ns: string) => {
    tokenFile = join(dir, `sa-${ns}`);
    await writeFile(tokenFile, await tokenFor("another-service"), { mode: 0o600 });
    return tokenFile;
  };
  return withController("ctl-sa-m", { tokenFile: firstToken, exitsZero: true }, async ({ ns }) => {
    await createWorker(ns, "m-0");
    const refused = await waitConfig(
      ns,
      "m-0",
      "refused",
      (o) =>
        condition(o, "Published")?.status === "False" && /40[13]/.test(condition(o, "Published").message),
    );
    assert.notEqual(refused.status?.ready, true);
    assert.equal(await statusOf(`${ns}/m-0`), null, "nothing published with a refused token");

    // The projected token rotates: the controller re-reads the file on every request.
    await writeFile(tokenFile, await tokenFor(SA_AUDIENCE), { mode: 0o600 });
    const ready = await waitConfig(ns, "m-0", "ready", (o) => o.status?.ready === true);
    assert.equal(condition(ready, "Published")?.status, "True");
    assert.equal((await statusOf(`${ns}/m-0`))?.phase, "published");
    const ds = await secret(ns, ready.status.dataSecretName);
    assert.match(Buffer.from(ds.data.value, "base64").toString(), /bootseal/);
  });
});
