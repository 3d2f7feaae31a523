/**
 * `bootseal controller` with the real Cluster API (v1.14, the capi peer): Cluster API's core
 * manager and its kubeadm bootstrap provider (CABPK) reconcile every object here, with their
 * admission webhooks registered, against the kube peer's kube-apiserver; a real `bootseal serve`
 * holds the configs. The test plays only the infrastructure provider and the kubelet
 * (test/controller/capi-world.ts). Each test has its own namespace and Cluster.
 */
import assert from "node:assert/strict";
import { createHash, createPublicKey } from "node:crypto";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import type { E2EService } from "../e2e/service.ts";
import { type AgeKey, run, tempDir } from "../fetcher/helpers.ts";
import { assertAppliedAsIgnition } from "../fetcher/ignition-v2-oracle.ts";
import { peer } from "../helpers/peers.ts";
import { lockSwtpm, pcrValues, tpm2 } from "../helpers/swtpm.ts";
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
  INFRA,
  initialiseControlPlane,
  initSpec,
  innerData,
  joinSpec,
  K8S_VERSION,
  kubeadm,
  nodeName,
  provisionCluster,
  realLabels,
} from "./capi-world.ts";
import {
  type Any,
  BSC,
  CAPI,
  condition,
  custom,
  getConfig,
  KUBEADM,
  MERGE,
  namespace,
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
/** The bare-metal machine's TPM (the swtpm peer's second TPM: no other test extends its PCRs). */
const TPM_TCTI = peer("SWTPM_OTHER_TCTI");
/** Its EK as an inventory records it (PEM), and that EK's SubjectPublicKeyInfo as base64 DER. */
let tpmEkPem: string;
let tpmEkDer: string;
/** Its PCR 7 now: the boot state the config is sealed to and the login's binding expects. */
let tpmPcr7: string;
/** The bare-metal test's namespace: the service's TPM rule and binding name it. */
let tpmNs: string;

before(async () => {
  const release = await lockSwtpm();
  try {
    const work = await tempDir("capi-real-tpm");
    await tpm2(TPM_TCTI, ["tpm2_flushcontext", "-t"]);
    await tpm2(
      TPM_TCTI,
      ["tpm2_createek", "-c", "ek.ctx", "-G", "rsa", "-u", "ek.pem", "-f", "pem"],
      work.path,
    );
    await tpm2(TPM_TCTI, ["tpm2_flushcontext", "-t"]);
    tpmEkPem = await readFile(join(work.path, "ek.pem"), "utf8");
    tpmEkDer = createPublicKey(tpmEkPem).export({ format: "der", type: "spki" }).toString("base64");
    tpmPcr7 = (await pcrValues(TPM_TCTI, [7]))["7"] as string;
    await work.remove();
  } finally {
    await release();
  }
  const ekSha256 = createHash("sha256").update(Buffer.from(tpmEkDer, "base64")).digest("hex");
  tpmNs = await namespace("capi-tpm");
  world = await controllerWorld("capi-real", async () => ({
    // Bare metal in the tpmNs namespace: the data key sealed to each machine's TPM alone, the
    // machine logging in with that TPM (its EK enrolled: no vendor certificate chain needed).
    rulesFirst: [`  - path_regex: ^${tpmNs}/`, `    tpm_ek: "publish#7=${tpmPcr7}"`],
    configLines: [
      "machineAuth:",
      "  audience: https://bootseal.capi-real.test",
      "  bindings:",
      "    - method: tpm",
      `      match: { ekPublicSha256: "${ekSha256}" }`,
      `      machines: "${tpmNs}/*"`,
      `      pcrs: { "7": "${tpmPcr7}" }`,
    ],
  }));
  ({ dir, key, service, kubeconfig } = world);
});
after(async () => {
  await world?.close();
});

const controller = (ns: string) =>
  startController([
    "--server",
    service.url,
    "--token-file",
    service.controllerTokenFile,
    "--kubeconfig",
    kubeconfig,
    "--namespace",
    ns,
  ]);

const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** The plaintext the service holds for a machine: its document, decrypted with the machine's key. */
async function heldBy(ns: string, name: string): Promise<Buffer> {
  const res = await service.get(`/v1/machines/${ns}/${name}/config`);
  assert.equal(res.status, 200, `the service holds ${ns}/${name}'s config`);
  const file = join(dir, `${ns}-${name}.sops.json`);
  await writeFile(file, Buffer.from(await res.arrayBuffer()));
  const r = await run(["decrypt", "--input-type", "binary", file], {
    PATH: process.env.PATH,
    SOPS_AGE_KEY_FILE: key.file,
  });
  assert.equal(r.code, 0, r.stderr);
  return Buffer.from(r.stdout, "latin1");
}

test("Cluster API v1.14's core manager and kubeadm provider behind BootsealConfig: control-plane init and worker join published as the provider wrote them, the stub as the Machines' data secret, init data within seconds of the infrastructure becoming ready (no 10-minute resync) and the worker's join within seconds of the control plane's node, nodeRef cleans up", {
  timeout: 600_000,
}, async () => {
  const ns = await namespace("capi-real");
  // The infrastructure is provisioned only after the Machines exist (as a cloud load balancer is).
  await createRealCluster(ns, "c1", { provisioned: false });
  const ctl = controller(ns);
  try {
    await createRealMachine(ns, "c1", { name: "cp-0", controlPlane: true, bootseal: initSpec("cp-0") });
    await createRealMachine(ns, "c1", { name: "worker-0", bootseal: joinSpec("worker-0") });
    await waitConfig(
      ns,
      "cp-0",
      "cp-0 waits for its inner config",
      (o) => condition(o, "InnerConfigReady")?.reason === "WaitingForDataSecret",
    );
    await new Promise((r) => setTimeout(r, 3_000));
    assert.equal(
      condition(await getConfig(ns, "cp-0"), "Published"),
      undefined,
      "nothing before the infrastructure",
    );

    // The kubeadm provider does not requeue a config whose Cluster has no infrastructure, and maps
    // Cluster events only to configs a Machine names: without bootseal's nudge a wrapped config
    // would wait for its 10-minute resync.
    const provisioned = Date.now();
    await provisionCluster(ns, "c1");
    // Cluster API's Machine controller owns the BootsealConfig; the kubeadm provider writes the init data.
    const cp = await waitConfig(
      ns,
      "cp-0",
      "cp-0 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    const initAfter = Date.now() - provisioned;
    assert.ok(initAfter < 60_000, `init data ${initAfter} ms after the infrastructure was provisioned`);
    assert.deepEqual(
      cp.metadata.ownerReferences.map((r: Any) => [r.kind, r.name]),
      [["Machine", "cp-0"]],
      "Cluster API set the owner",
    );
    const init = await innerData(ns, "cp-0-inner");
    assert.match(init.toString(), /^## template: jinja\n#cloud-config\n|^#cloud-config\n/);
    assert.match(init.toString(), /kubeadm init/);
    assert.deepEqual(await heldBy(ns, "cp-0"), init, "the service holds exactly the provider's init data");
    assert.equal(cp.metadata.annotations["bootstrap.bootseal.dev/published-sha256"], sha256(init));
    await until(
      "Cluster API names bootseal's data secret on the Machine",
      async () => (await getMachine(ns, "cp-0")).spec.bootstrap.dataSecretName === "cp-0-bootseal",
      { tries: 600 },
    );

    // The worker waits for the control plane: no join data yet.
    const waiting = await getConfig(ns, "worker-0");
    assert.notEqual(condition(waiting, "Published")?.status, "True");

    // The control-plane machine boots and its node registers: Cluster API sets the nodeRef and
    // the Cluster's ControlPlaneInitialized; the wrapped worker config gets its join data at once.
    await bootMachine(ns, "cp-0");
    await until(
      "Cluster API set cp-0's nodeRef",
      async () => (await getMachine(ns, "cp-0")).status?.nodeRef?.name === nodeName(ns, "cp-0"),
      { tries: 1200 },
    );
    const t0 = Date.now();
    const w = await waitConfig(
      ns,
      "worker-0",
      "worker-0 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    const waited = Date.now() - t0;
    assert.ok(
      waited < 60_000,
      // (the kubeadm provider also looks again at a waiting join every 30 s; the nudge is sooner)
      `join data ${waited} ms after the control plane initialised`,
    );
    const join = await innerData(ns, "worker-0-inner");
    assert.match(join.toString(), /kubeadm join/);
    assert.deepEqual(
      await heldBy(ns, "worker-0"),
      join,
      "the service holds exactly the provider's join data",
    );
    assert.equal(w.metadata.annotations["bootstrap.bootseal.dev/published-version"], "1");

    // cp-0 has its nodeRef: its config is deleted from bootseal (deleteConfigOnNodeRef).
    await waitConfig(
      ns,
      "cp-0",
      "cp-0 config deleted",
      (o) => condition(o, "Published")?.reason === "ConfigDeleted",
    );
    assert.equal((await service.get(`/v1/machines/${ns}/cp-0/config`)).status, 404);
    assert.equal(ctl.process.exitCode, null);
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
    await deleteNodes(ns, ["cp-0"]);
  }
});

test("a clusterctl move or backup restore (the inner config's status lost): the kubeadm provider points it at bootseal's own data secret; nothing is republished, the service keeps the provider's data", {
  timeout: 600_000,
}, async () => {
  const ns = await namespace("capi-restore");
  await createRealCluster(ns, "c1");
  const ctl = controller(ns);
  try {
    await createRealMachine(ns, "c1", { name: "cp-0", controlPlane: true, bootseal: initSpec("cp-0") });
    await waitConfig(ns, "cp-0", "cp-0 published", (o) => condition(o, "Published")?.status === "True");
    const init = await innerData(ns, "cp-0-inner");
    await until(
      "Cluster API names bootseal's data secret on the Machine",
      async () => (await getMachine(ns, "cp-0")).spec.bootstrap.dataSecretName === "cp-0-bootseal",
      { tries: 600 },
    );
    const before = (await (await service.get(`/v1/machines/${ns}/cp-0/status`)).json()) as Any;

    // What a restore leaves: the inner config without its status.
    await custom().patchNamespacedCustomObjectStatus(
      {
        ...KUBEADM,
        namespace: ns,
        name: "cp-0-inner",
        body: { status: { dataSecretName: null, initialization: null } },
      },
      MERGE,
    );
    await until(
      "the kubeadm provider's restore branch named the Machine's data secret",
      async () => (await getKubeadmConfig(ns, "cp-0-inner")).status?.dataSecretName === "cp-0-bootseal",
      { tries: 600 },
    );
    const kept = await waitConfig(
      ns,
      "cp-0",
      "InnerConfigReady DataSecretRestored",
      (o) => condition(o, "InnerConfigReady")?.reason === "DataSecretRestored",
    );
    // Several reconciles later: still version 1, the provider's bytes, no stub published.
    await new Promise((r) => setTimeout(r, 8_000));
    const after = await getConfig(ns, "cp-0");
    assert.equal(after.metadata.annotations["bootstrap.bootseal.dev/published-version"], "1");
    assert.equal(kept.metadata.annotations["bootstrap.bootseal.dev/published-sha256"], sha256(init));
    const now = (await (await service.get(`/v1/machines/${ns}/cp-0/status`)).json()) as Any;
    assert.equal(now.version, before.version, "no publish after the restore");
    assert.deepEqual(await heldBy(ns, "cp-0"), init);
    const stub = Buffer.from((await secret(ns, "cp-0-bootseal")).data.value, "base64").toString();
    assert.ok(!stub.includes("kubeadm init"), "the data secret still holds the stub");
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
  }
});

test("a paused Cluster: condition Paused, no finalizer and no inner config until it is unpaused; then published", {
  timeout: 600_000,
}, async () => {
  const ns = await namespace("capi-paused");
  await createRealCluster(ns, "c1", { paused: true });
  const ctl = controller(ns);
  try {
    await createRealMachine(ns, "c1", {
      name: "cp-0",
      controlPlane: true,
      // (and spec.skipModules: the stub's fetch skips ntp)
      bootseal: { ...initSpec("cp-0"), skipModules: ["ntp"] },
    });
    const paused = await waitConfig(
      ns,
      "cp-0",
      "Paused=True",
      (o) => condition(o, "Paused")?.status === "True",
    );
    assert.equal(condition(paused, "Paused").reason, "Paused");
    await new Promise((r) => setTimeout(r, 5_000));
    const still = await getConfig(ns, "cp-0");
    assert.deepEqual(still.metadata.finalizers ?? [], []);
    assert.equal(
      await getKubeadmConfig(ns, "cp-0-inner").then(
        () => "exists",
        () => "absent",
      ),
      "absent",
    );

    await custom().patchNamespacedCustomObject(
      { ...CAPI, namespace: ns, plural: "clusters", name: "c1", body: { spec: { paused: false } } },
      MERGE,
    );
    const live = await waitConfig(
      ns,
      "cp-0",
      "published after unpause",
      (o) => condition(o, "Published")?.status === "True",
    );
    assert.equal(condition(live, "Paused").status, "False");
    assert.ok(live.metadata.finalizers.includes("bootstrap.bootseal.dev/config"));
    const stub = Buffer.from((await secret(ns, live.status.dataSecretName)).data.value, "base64").toString();
    assert.match(stub, /--skip-module ntp/, "spec.skipModules reaches the stub's fetch");
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
  }
});

test("a failed bootstrap seen and repaired by Cluster API: a MachineDeployment's machine reports failed, its BootsealConfig turns Ready=False BootstrapFailed, the Machine mirrors it as BootstrapConfigReady, a MachineHealthCheck remediates it, and the MachineSet's new Machine gets a fresh config and boots", {
  timeout: 900_000,
}, async () => {
  const ns = await namespace("capi-mhc");
  await createRealCluster(ns, "c1");
  const ctl = controller(ns);
  const c = custom();
  try {
    // The control plane first: workers join only an initialised cluster.
    await initialiseControlPlane(ns, "c1", "bootseal");

    const labels = realLabels("c1", { "cluster.x-k8s.io/deployment-name": "workers" });
    await c.createNamespacedCustomObject({
      group: BSC.group,
      version: BSC.version,
      namespace: ns,
      plural: "bootsealconfigtemplates",
      body: {
        apiVersion: `${BSC.group}/${BSC.version}`,
        kind: "BootsealConfigTemplate",
        metadata: { name: "workers", namespace: ns, labels: realLabels("c1") },
        spec: { template: { metadata: { labels }, spec: joinSpec("worker") } },
      },
    });
    await c.createNamespacedCustomObject({
      ...INFRA,
      namespace: ns,
      plural: "testmachinetemplates",
      body: {
        apiVersion: `${INFRA.group}/${INFRA.version}`,
        kind: "TestMachineTemplate",
        metadata: { name: "workers", namespace: ns, labels: realLabels("c1") },
        spec: { template: { metadata: { labels }, spec: {} } },
      },
    });
    await c.createNamespacedCustomObject({
      ...CAPI,
      namespace: ns,
      plural: "machinehealthchecks",
      body: {
        apiVersion: `${CAPI.group}/${CAPI.version}`,
        kind: "MachineHealthCheck",
        metadata: { name: "workers-bootstrap", namespace: ns, labels: realLabels("c1") },
        spec: {
          clusterName: "c1",
          selector: { matchLabels: { "cluster.x-k8s.io/deployment-name": "workers" } },
          checks: {
            unhealthyMachineConditions: [
              { type: "BootstrapConfigReady", status: "False", timeoutSeconds: 1 },
            ],
          },
        },
      },
    });
    await c.createNamespacedCustomObject({
      ...CAPI,
      namespace: ns,
      plural: "machinedeployments",
      body: {
        apiVersion: `${CAPI.group}/${CAPI.version}`,
        kind: "MachineDeployment",
        metadata: { name: "workers", namespace: ns, labels: realLabels("c1") },
        spec: {
          clusterName: "c1",
          replicas: 1,
          selector: { matchLabels: { "cluster.x-k8s.io/deployment-name": "workers" } },
          template: {
            metadata: { labels },
            spec: {
              clusterName: "c1",
              version: K8S_VERSION,
              bootstrap: {
                configRef: { apiGroup: BSC.group, kind: "BootsealConfigTemplate", name: "workers" },
              },
              infrastructureRef: { apiGroup: INFRA.group, kind: "TestMachineTemplate", name: "workers" },
            },
          },
        },
      },
    });

    /** The deployment's one live Machine and its BootsealConfig, once published. */
    const worker = async (not?: string): Promise<{ machine: string; config: string; stub: string }> => {
      let found: { machine: string; config: string } | undefined;
      await until(
        "a worker Machine from the MachineSet with its BootsealConfig",
        async () => {
          const list = (await c.listNamespacedCustomObject({
            ...CAPI,
            namespace: ns,
            plural: "machines",
            labelSelector: "cluster.x-k8s.io/deployment-name=workers",
          })) as Any;
          const m = list.items.find(
            (x: Any) =>
              !x.metadata.deletionTimestamp && x.metadata.name !== not && x.spec.bootstrap.configRef?.name,
          );
          found = m && { machine: m.metadata.name, config: m.spec.bootstrap.configRef.name };
          return found !== undefined;
        },
        { tries: 1200 },
      );
      const { machine, config } = found as { machine: string; config: string };
      const bsc = await waitConfig(
        ns,
        config,
        `${config} published`,
        (o) => o.status?.dataSecretName !== undefined,
      );
      const stub = Buffer.from((await secret(ns, bsc.status.dataSecretName)).data.value, "base64").toString();
      return { machine, config, stub };
    };

    // The first worker boots and kubeadm join fails.
    const first = await worker();
    const failedRun = await runCloudInitStub(first.stub, join(dir, `${ns}-first`), {
      ageKeyFile: key.file,
      kubeadmExit: 1,
      privateRun: true,
    });
    assert.notEqual(failedRun.code, 0, "the fetch fails with kubeadm");
    const failed = await waitConfig(
      ns,
      first.config,
      "Ready=False BootstrapFailed",
      (o) => condition(o, "Ready")?.reason === "BootstrapFailed",
    );
    assert.match(condition(failed, "Ready").message, /exit code 1/);
    await until(
      "Cluster API mirrors it as BootstrapConfigReady=False on the Machine",
      async () => {
        const m = await getMachine(ns, first.machine).catch(() => undefined);
        // Remediation may already have begun: a deleting (or deleted) Machine also counts.
        if (!m || m.metadata.deletionTimestamp) return true;
        const ready = (m.status?.conditions ?? []).find((x: Any) => x.type === "BootstrapConfigReady");
        return ready?.status === "False" && ready?.reason === "BootstrapFailed";
      },
      { tries: 1200 },
    );

    // The MachineHealthCheck remediates: the MachineSet replaces the Machine; the old config goes.
    const second = await worker(first.machine);
    assert.notEqual(second.config, first.config);
    await until(
      "the failed Machine is gone",
      async () =>
        await getMachine(ns, first.machine).then(
          () => false,
          () => true,
        ),
      { tries: 1200 },
    );
    assert.equal((await service.get(`/v1/machines/${ns}/${first.machine}/config`)).status, 404);

    // The new Machine boots with its own fresh config.
    const ok = await runCloudInitStub(second.stub, join(dir, `${ns}-second`), {
      ageKeyFile: key.file,
      kubeadmExit: 0,
      privateRun: true,
    });
    assert.equal(ok.code, 0, ok.stderr);
    const done = await waitConfig(ns, second.config, "succeeded", (o) => o.status?.phase === "succeeded");
    assert.equal(condition(done, "Ready").status, "True");
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
    await deleteNodes(ns, ["cp-0"]);
  }
});

test("format: ignition (Flatcar): the kubeadm provider's Ignition spec 2.3.0 is published as it wrote it, accepted as payload ignition, and bootseal applies it as Ignition applies its 3.1.0 translation (files, modes, units)", {
  timeout: 600_000,
}, async () => {
  const ns = await namespace("capi-ign");
  await createRealCluster(ns, "c1");
  const ctl = controller(ns);
  try {
    await createRealMachine(ns, "c1", {
      name: "cp-0",
      controlPlane: true,
      bootseal: {
        ...kubeadm({ format: "ignition", initConfiguration: { nodeRegistration: { name: "cp-0" } } }),
        payload: "ignition",
      },
    });
    const cp = await waitConfig(
      ns,
      "cp-0",
      "cp-0 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    assert.equal(condition(cp, "InnerConfigReady").status, "True", "payload ignition accepts spec 2.3.0");
    const data = await innerData(ns, "cp-0-inner");
    const ign = JSON.parse(data.toString());
    assert.equal(ign.ignition.version, "2.3.0", "the kubeadm provider emits Ignition 2.3.0");
    assert.deepEqual(
      await heldBy(ns, "cp-0"),
      data,
      "the service holds the provider's Ignition as it wrote it",
    );
    assert.ok(ign.storage.files.length > 0 && ign.systemd.units.length > 0, "files and units to apply");
    await assertAppliedAsIgnition(ign);
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
  }
});

/**
 * A machine directory as a Debian image leaves it for cloud-init's modules: accounts, os-release,
 * chrony installed with cloud-init's own template, cloud-init's instance data. Two programs are
 * test doubles that record their arguments: `cloud-init` (disk_setup and mounts are handed to
 * it; the real one would partition this host) and `service` (no init system runs here).
 */
async function debianMachine(root: string, hostname: string): Promise<void> {
  const put = async (path: string, text: string, mode = 0o644) => {
    await mkdir(dirname(join(root, path)), { recursive: true });
    await writeFile(join(root, path), text, { mode });
  };
  await put("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n");
  await put("etc/group", "root:x:0:\nsudo:x:27:\nusers:x:100:\n");
  await put("etc/shadow", "root:*:19000:0:99999:7:::\n", 0o640);
  await put("etc/gshadow", "root:*::\nsudo:*::\nusers:*::\n", 0o640);
  await put("etc/sudoers", "Defaults env_reset\n@includedir /etc/sudoers.d\n", 0o440);
  await put("etc/os-release", 'ID=debian\nVERSION_ID="12"\n');
  // The image's programs cloud-init looks for (its `which` under the root); the host's own shadow
  // tools then act on the root with --root, as cloud-init's would on the machine.
  for (const program of [
    "usr/sbin/chronyd",
    "usr/sbin/useradd",
    "usr/sbin/groupadd",
    "usr/sbin/usermod",
    "usr/bin/passwd",
  ])
    await put(program, "#!/bin/sh\nexit 0\n", 0o755);
  await put(
    "etc/cloud/templates/chrony.conf.debian.tmpl",
    await readFile("/etc/cloud/templates/chrony.conf.debian.tmpl", "utf8"),
  );
  await put(
    "run/cloud-init/instance-data.json",
    JSON.stringify({ v1: { local_hostname: hostname }, ds: { meta_data: { "local-hostname": hostname } } }),
  );
  for (const program of ["cloud-init", "service"]) {
    await put(`usr/local/sbin/${program}`, `#!/bin/sh\necho "$@" >> "$0.calls"\n`, 0o755);
  }
  await mkdir(join(root, "home"), { recursive: true });
}

test("the kubeadm provider's users, ntp, diskSetup, mounts and a Jinja node name: published as it wrote them and applied by the machine's fetch as cloud-init would (the real shadow tools, cloud-init's chrony template; modes and the commands' umask as cloud-init's)", {
  timeout: 600_000,
}, async () => {
  const ns = await namespace("capi-modules");
  await createRealCluster(ns, "c1");
  const ctl = controller(ns);
  try {
    await initialiseControlPlane(ns, "c1", "kubeadm");
    const key_ = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBootsealTestKeyOnly ops@example";
    await createRealMachine(ns, "c1", {
      name: "worker-0",
      bootseal: kubeadm({
        joinConfiguration: { nodeRegistration: { name: "{{ ds.meta_data.local_hostname }}" } },
        users: [
          { name: "ops", sudo: "ALL=(ALL) NOPASSWD:ALL", sshAuthorizedKeys: [key_], lockPassword: true },
        ],
        ntp: { enabled: true, servers: ["time.example.net"] },
        diskSetup: {
          partitions: [{ device: "/dev/sdb", layout: true, overwrite: false, tableType: "gpt" }],
          filesystems: [{ device: "/dev/sdb1", filesystem: "ext4", label: "etcd_disk" }],
        },
        mounts: [["LABEL=etcd_disk", "/var/lib/etcddisk"]],
      }),
    });
    const w = await waitConfig(
      ns,
      "worker-0",
      "worker-0 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    const data = await innerData(ns, "worker-0-inner");
    const text = data.toString();
    assert.ok(text.startsWith("## template: jinja\n"), "the provider's Jinja header");
    for (const module of ["users:", "ntp:", "disk_setup:", "fs_setup:", "mounts:"])
      assert.ok(text.includes(`\n${module}`), `the provider emits ${module}`);
    assert.deepEqual(await heldBy(ns, "worker-0"), data);

    const root = join(dir, `${ns}-worker-0`);
    await debianMachine(root, "ip-10-0-0-7.ec2.internal");
    const stub = Buffer.from((await secret(ns, w.status.dataSecretName)).data.value, "base64").toString();
    const r = await runCloudInitStub(stub, root, { ageKeyFile: key.file, kubeadmExit: 0, privateRun: true });
    assert.equal(r.code, 0, r.stderr);
    await waitConfig(ns, "worker-0", "succeeded", (o) => o.status?.phase === "succeeded");

    // Jinja: the node name from cloud-init's instance data.
    assert.match(
      await readFile(join(root, "run/kubeadm/kubeadm-join-config.yaml"), "utf8"),
      /name: 'ip-10-0-0-7\.ec2\.internal'$/m,
    );
    // users: the real useradd and passwd under the root; sudoers and keys with cloud-init's modes.
    assert.match(await readFile(join(root, "etc/passwd"), "utf8"), /^ops:x:\d+:\d+::\/home\/ops:/m);
    assert.match(
      await readFile(join(root, "etc/shadow"), "utf8"),
      /^ops:!/m,
      "lockPassword: the password locked",
    );
    const sudoers = join(root, "etc/sudoers.d/90-cloud-init-users");
    assert.match(await readFile(sudoers, "utf8"), /^ops ALL=\(ALL\) NOPASSWD:ALL$/m);
    assert.equal((await stat(sudoers)).mode & 0o777, 0o440);
    const keys = join(root, "home/ops/.ssh/authorized_keys");
    assert.match(await readFile(keys, "utf8"), /BootsealTestKeyOnly/);
    assert.equal((await stat(keys)).mode & 0o777, 0o600);
    // ntp: chrony's config from cloud-init's template, and its service restarted.
    assert.match(await readFile(join(root, "etc/chrony/chrony.conf"), "utf8"), /^server time\.example\.net/m);
    assert.equal(await readFile(join(root, "usr/local/sbin/service.calls"), "utf8"), "chrony restart\n");
    // disk_setup and mounts: handed to the machine's cloud-init, in that order.
    const handed = (await readFile(join(root, "usr/local/sbin/cloud-init.calls"), "utf8")).trim().split("\n");
    assert.deepEqual(
      handed.map((l) => l.replace(/--file \S+/, "--file F")),
      [
        "single --name disk_setup --frequency always --file F",
        "single --name mounts --frequency always --file F",
      ],
    );
    // Modes as cloud-init's: directories the payload made 0755, and kubeadm's sentinel written
    // by runcmd under umask 022 (0644), though the fetcher itself runs under UMask=0077.
    for (const d of ["run/kubeadm", "run/cluster-api"])
      assert.equal((await stat(join(root, d))).mode & 0o777, 0o755, d);
    assert.equal((await stat(join(root, "run/cluster-api/bootstrap-success.complete"))).mode & 0o777, 0o644);
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
    await deleteNodes(ns, ["cp-0"]);
  }
});

test("bare metal with a TPM (Cluster API's kubeadm provider, swtpm): the worker waits for its EK (WaitingForTpmEk), the inventory annotates the Machine with it, the join data is sealed to that TPM alone under a PCR 7 policy, the stub carries no secret, the machine logs in with its TPM, unseals, runs kubeadm and reports succeeded; an infrastructure object's EK field works as the source too", {
  timeout: 600_000,
}, async () => {
  const ns = tpmNs;
  await createRealCluster(ns, "c1");
  const ctl = controller(ns);
  try {
    await initialiseControlPlane(ns, "c1", "kubeadm");
    await createRealMachine(ns, "c1", {
      name: "worker-0",
      bootseal: { ...joinSpec("worker-0"), tpm: { pcrs: { "7": tpmPcr7 } } },
    });
    const waiting = await waitConfig(
      ns,
      "worker-0",
      "worker-0 waits for its TPM's EK",
      (o) => condition(o, "Published")?.reason === "WaitingForTpmEk",
    );
    assert.match(condition(waiting, "Published").message, /bootstrap.bootseal.dev\/tpm-ek/);
    assert.equal((await service.get(`/v1/machines/${ns}/worker-0/config`)).status, 404, "nothing published");

    // The inventory (or the operator) records the machine's EK on its Machine.
    await custom().patchNamespacedCustomObject(
      {
        ...CAPI,
        namespace: ns,
        plural: "machines",
        name: "worker-0",
        body: { metadata: { annotations: { "bootstrap.bootseal.dev/tpm-ek": tpmEkPem } } },
      },
      MERGE,
    );
    const w = await waitConfig(
      ns,
      "worker-0",
      "worker-0 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    const res = await service.get(`/v1/machines/${ns}/worker-0/config`);
    const doc = (await res.json()) as { sops: Record<string, unknown> };
    assert.deepEqual(
      (doc.sops.tpm as { ek_public: string; pcrs: string }[]).map((t) => [t.ek_public, t.pcrs]),
      [[tpmEkDer, "sha256:7"]],
      "one key: the machine's EK under the PCR 7 policy",
    );
    assert.equal(doc.sops.age, undefined, "no other key anywhere");

    const stub = Buffer.from((await secret(ns, w.status.dataSecretName)).data.value, "base64").toString();
    assert.match(stub, /ExecStart=\S+ fetch --from \S+ --auth tpm --server-id \S+ --apply --root \/\n/);
    assert.doesNotMatch(stub, /- path: \/etc\/bootseal\/token/, "no token file in the user data");
    const root = join(dir, `${ns}-worker-0`);
    const release = await lockSwtpm();
    let r: Awaited<ReturnType<typeof runCloudInitStub>>;
    try {
      r = await runCloudInitStub(stub, root, {
        ageKeyFile: "/nonexistent",
        kubeadmExit: 0,
        privateRun: true,
        tpmTcti: TPM_TCTI,
      });
    } finally {
      await release();
    }
    assert.equal(r.code, 0, r.stderr);
    assert.match(
      await readFile(join(root, "kubeadm.args"), "utf8"),
      /^join$/m,
      "kubeadm ran with the join data",
    );
    await waitConfig(ns, "worker-0", "succeeded", (o) => o.status?.phase === "succeeded");

    // A provider that reports the host's EK: spec.tpm.ekFieldPath on its infrastructure object
    // (a v1beta2 reference names only the group: its version is found by discovery).
    await createRealMachine(ns, "c1", {
      name: "worker-1",
      bootseal: { ...joinSpec("worker-1"), tpm: { ekFieldPath: "status.tpm.ekPublic" } },
    });
    await waitConfig(
      ns,
      "worker-1",
      "worker-1 waits",
      (o) => condition(o, "Published")?.reason === "WaitingForTpmEk",
    );
    await custom().patchNamespacedCustomObjectStatus(
      {
        ...INFRA,
        namespace: ns,
        plural: "testmachines",
        name: "worker-1",
        body: { status: { tpm: { ekPublic: tpmEkPem } } },
      },
      MERGE,
    );
    await waitConfig(
      ns,
      "worker-1",
      "worker-1 published",
      (o) => condition(o, "Published")?.status === "True",
    );
    const second = (await (await service.get(`/v1/machines/${ns}/worker-1/config`)).json()) as {
      sops: { tpm: { ek_public: string; pcrs: string }[] };
    };
    assert.deepEqual(
      second.sops.tpm.map((t) => [t.ek_public, t.pcrs]),
      [[tpmEkDer, "sha256:7"]],
      "the rule's policy",
    );
    assert.equal(ctl.process.exitCode, null);
  } finally {
    assert.equal(await ctl.stop(), 0, `controller exits 0 on SIGTERM: ${ctl.log().slice(-2000)}`);
    await deleteNodes(ns, ["cp-0"]);
  }
});
