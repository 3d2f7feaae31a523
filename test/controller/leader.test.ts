/**
 * Leader election (src/controller/leader.ts) against the kube peer's real API server and its
 * coordination.k8s.io Leases: one leader among replicas racing for a new lease; a standby that
 * waits while the leader renews and takes over when it stops; a released lease taken at once;
 * a holder whose clock is an hour behind not overtaken while it renews (expiry is timed on the
 * standby's clock, as in client-go); a leader that gives up when another holder took the
 * lease; renewing for a long time leaves no listener behind on the stop signal.
 */
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import { V1MicroTime } from "@kubernetes/client-node";
import { Kube } from "../../src/controller/kube.ts";
import { LEASE_NAME, LeaderElector, type LeaderOptions } from "../../src/controller/leader.ts";
import { until } from "../helpers/until.ts";
import { kc, namespace } from "./harness.ts";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
/** Short periods, so that a test waits seconds, not the 15 s default lease. */
const FAST = { leaseDurationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 200 };

const elector = (ns: string, identity: string, o: Partial<LeaderOptions> = {}) =>
  new LeaderElector(new Kube(kc()), { namespace: ns, identity, ...FAST, ...o }, quiet);
const coordination = () => new Kube(kc()).coordination;
const holder = async (ns: string) =>
  (await coordination().readNamespacedLease({ name: LEASE_NAME, namespace: ns })).spec?.holderIdentity;

/** Keeps writing the lease as `identity` with a renewTime `skewMs` off this clock, until stopped. */
function foreignHolder(ns: string, identity: string, skewMs: number) {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const api = coordination();
      const lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace: ns });
      lease.spec = {
        ...lease.spec,
        holderIdentity: identity,
        leaseDurationSeconds: 2,
        renewTime: new V1MicroTime(Date.now() + skewMs),
      };
      await api.replaceNamespacedLease({ name: LEASE_NAME, namespace: ns, body: lease }).catch(() => {});
      await new Promise((r) => setTimeout(r, 150));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

test("leader election, kube-apiserver: of five replicas racing for a new lease exactly one leads, and only it renews", async () => {
  const ns = await namespace("lease-race");
  const replicas = Array.from({ length: 5 }, (_, i) => elector(ns, `replica-${i}`));
  const won = await Promise.all(replicas.map((r) => r.tryAcquireOrRenew()));
  assert.equal(won.filter(Boolean).length, 1, `winners: ${won}`);
  const leader = won.indexOf(true);
  assert.equal(await holder(ns), `replica-${leader}`);
  const again = await Promise.all(replicas.map((r) => r.tryAcquireOrRenew()));
  assert.deepEqual(
    again,
    replicas.map((_, i) => i === leader),
  );
});

test("leader election, kube-apiserver: a standby waits while the leader renews, and takes over when it stops", async () => {
  const ns = await namespace("lease-standby");
  // A longer lease than FAST: a renewal slowed by a loaded machine must not count as a stop.
  const a = elector(ns, "a", { leaseDurationMs: 4_000, renewDeadlineMs: 3_000 });
  const b = elector(ns, "b", { leaseDurationMs: 4_000, renewDeadlineMs: 3_000 });
  assert.ok(await a.tryAcquireOrRenew());
  const holding = new AbortController();
  const held = a.hold(holding.signal, () => assert.fail("a lost a lease it renews"));
  try {
    // A lease duration and a half of renewals: b never gets the lease.
    for (let i = 0; i < 30; i++) {
      assert.equal(await b.tryAcquireOrRenew(), false, `attempt ${i}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    holding.abort(); // a failed assertion must not leave the renewals running
  }
  const transitions = (await coordination().readNamespacedLease({ name: LEASE_NAME, namespace: ns })).spec
    ?.leaseTransitions;
  await held; // a stopped renewing without releasing (a crash)
  const standing = new AbortController();
  assert.ok(await b.acquire(standing.signal));
  const lease = await coordination().readNamespacedLease({ name: LEASE_NAME, namespace: ns });
  assert.equal(lease.spec?.holderIdentity, "b");
  assert.equal(lease.spec?.leaseTransitions, (transitions ?? 0) + 1);
});

test("leader election, kube-apiserver: a released lease is taken at once, without waiting out its duration", async () => {
  const ns = await namespace("lease-release");
  const a = elector(ns, "a", { leaseDurationMs: 60_000 });
  const b = elector(ns, "b", { leaseDurationMs: 60_000 });
  assert.ok(await a.tryAcquireOrRenew());
  assert.equal(await b.tryAcquireOrRenew(), false);
  await a.release();
  assert.ok(await b.tryAcquireOrRenew(), "the next attempt takes it");
  assert.equal(await holder(ns), "b");
  await a.release(); // not a's any more: nothing changes
  assert.equal(await holder(ns), "b");
});

test("leader election, kube-apiserver: a holder whose clock is an hour behind is not overtaken while it renews", async () => {
  const ns = await namespace("lease-skew");
  const first = elector(ns, "first");
  assert.ok(await first.tryAcquireOrRenew()); // creates the lease
  const skewed = foreignHolder(ns, "skewed", -3_600_000);
  const b = elector(ns, "b");
  try {
    await until("the skewed holder has the lease", async () => (await holder(ns)) === "skewed");
    for (let i = 0; i < 20; i++) {
      assert.equal(await b.tryAcquireOrRenew(), false, `attempt ${i}: its renewTime reads an hour old`);
      await new Promise((r) => setTimeout(r, 200));
    }
  } finally {
    await skewed.stop();
  }
  await until("b takes the lease once the skewed holder stops renewing", () => b.tryAcquireOrRenew());
  assert.equal(await holder(ns), "b");
});

test("leader election, kube-apiserver: a leader gives up once another holder has taken the lease", async () => {
  const ns = await namespace("lease-lost");
  const a = elector(ns, "a");
  assert.ok(await a.tryAcquireOrRenew());
  let lost = false;
  const holding = new AbortController();
  const held = a.hold(holding.signal, () => {
    lost = true;
  });
  const intruder = foreignHolder(ns, "intruder", 0);
  try {
    await until("a gives the lease up", () => lost);
    await held; // hold() returns after calling lost
    assert.equal(await holder(ns), "intruder");
  } finally {
    holding.abort();
    await intruder.stop();
  }
});

test("leader election, kube-apiserver: renewing for many periods leaves no listener on the stop signal", async () => {
  const ns = await namespace("lease-listeners");
  const a = elector(ns, "a", { retryPeriodMs: 20 });
  assert.ok(await a.tryAcquireOrRenew());
  const holding = new AbortController();
  const held = a.hold(holding.signal, () => assert.fail("lost"));
  const renewTimes = new Set<number>();
  const listeners = () => getEventListeners(holding.signal, "abort").length;
  let during: number;
  try {
    await until(
      "20 renewals",
      async () => {
        const t = (await coordination().readNamespacedLease({ name: LEASE_NAME, namespace: ns })).spec
          ?.renewTime;
        if (t) renewTimes.add(new Date(t).getTime());
        return renewTimes.size >= 20;
      },
      { everyMs: 10 },
    );
    during = listeners();
  } finally {
    holding.abort();
  }
  await held;
  assert.ok(during <= 1, `at most the current wait's listener, not ${during}`);
  assert.equal(listeners(), 0);
});
