/**
 * Leader election on a coordination.k8s.io Lease (`bootseal-controller`), the way client-go's
 * leaderelection does it: take the lease when it is free or its holder stopped renewing for
 * leaseDuration, renew every retryPeriod, and give up leadership (the caller exits) when a
 * renewal has not succeeded for renewDeadline. Conflicts (409) mean someone else won the race.
 * As in client-go, "stopped renewing" is timed on this replica's clock, from when it last saw
 * the lease record change, never from the holder's renewTime: clocks that disagree between
 * nodes cannot make a live leader's lease look expired.
 */
import { type V1Lease, V1MicroTime } from "@kubernetes/client-node";
import type { Kube } from "./kube.ts";
import type { Log } from "./reconciler.ts";

export const LEASE_NAME = "bootseal-controller";

export interface LeaderOptions {
  readonly namespace: string;
  readonly identity: string;
  readonly leaseDurationMs?: number;
  readonly renewDeadlineMs?: number;
  readonly retryPeriodMs?: number;
}

const status = (err: unknown) => (err as { code?: number }).code ?? 0;
/** Waits `ms`, or less when `signal` aborts; leaves no listener behind (hold() sleeps for hours). */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });

/** What identifies one version of the lease's leader record (client-go compares the record). */
const recordOf = (spec: NonNullable<V1Lease["spec"]>) =>
  JSON.stringify([
    spec.holderIdentity ?? "",
    spec.renewTime ? new Date(spec.renewTime).getTime() : 0,
    spec.leaseTransitions ?? 0,
  ]);

export class LeaderElector {
  readonly #kube: Kube;
  readonly #o: Required<LeaderOptions>;
  readonly #log: Log;
  /** The lease record last seen, and when (this replica's clock) it was first seen so. */
  #observed: { readonly record: string; readonly at: number } | undefined;

  constructor(kube: Kube, opts: LeaderOptions, log: Log) {
    this.#kube = kube;
    this.#o = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, ...opts };
    this.#log = log;
  }

  /** One attempt to take or renew the lease; true when we hold it afterwards. */
  async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, identity, leaseDurationMs } = this.#o;
    const api = this.#kube.coordination;
    const now = new V1MicroTime(Date.now());
    let lease: V1Lease;
    try {
      lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace });
    } catch (err) {
      if (status(err) !== 404) throw err;
      try {
        const created = await api.createNamespacedLease({
          namespace,
          body: {
            metadata: { name: LEASE_NAME, namespace },
            spec: {
              holderIdentity: identity,
              leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
              acquireTime: now,
              renewTime: now,
              leaseTransitions: 0,
            },
          },
        });
        this.#observed = { record: recordOf(created.spec ?? {}), at: Date.now() };
        return true;
      } catch (e) {
        if (status(e) === 409) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const mine = spec.holderIdentity === identity;
    const record = recordOf(spec);
    if (this.#observed?.record !== record) this.#observed = { record, at: Date.now() };
    const duration = (spec.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
    if (!mine && spec.holderIdentity && this.#observed.at + duration > Date.now()) return false;
    lease.spec = {
      ...spec,
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      renewTime: now,
      ...(mine ? {} : { acquireTime: now, leaseTransitions: (spec.leaseTransitions ?? 0) + 1 }),
    };
    try {
      const written = await api.replaceNamespacedLease({ name: LEASE_NAME, namespace, body: lease });
      this.#observed = { record: recordOf(written.spec ?? {}), at: Date.now() };
      return true;
    } catch (err) {
      if (status(err) === 409) return false;
      throw err;
    }
  }

  /** Resolves once we lead (or `signal` aborts: false). */
  async acquire(signal: AbortSignal): Promise<boolean> {
    let logged = false;
    while (!signal.aborted) {
      try {
        if (await this.tryAcquireOrRenew()) {
          this.#log.info(
            { lease: `${this.#o.namespace}/${LEASE_NAME}`, identity: this.#o.identity },
            "leading",
          );
          return true;
        }
        if (!logged) this.#log.info({ lease: `${this.#o.namespace}/${LEASE_NAME}` }, "waiting for the lease");
        logged = true;
      } catch (err) {
        this.#log.warn({ code: status(err) }, "leader election: the lease cannot be read or written");
      }
      await sleep(this.#o.retryPeriodMs, signal);
    }
    return false;
  }

  /** Renews until `signal` aborts; calls `lost` once when renewals fail for renewDeadline. */
  async hold(signal: AbortSignal, lost: () => void): Promise<void> {
    let last = Date.now();
    while (!signal.aborted) {
      await sleep(this.#o.retryPeriodMs, signal);
      if (signal.aborted) break;
      try {
        if (await this.tryAcquireOrRenew()) last = Date.now();
      } catch {
        // counted against the deadline below
      }
      if (Date.now() - last > this.#o.renewDeadlineMs) {
        this.#log.error({ lease: `${this.#o.namespace}/${LEASE_NAME}` }, "lost the lease");
        lost();
        return;
      }
    }
  }

  /** On a clean stop: let the next replica take over at once. */
  async release(): Promise<void> {
    const api = this.#kube.coordination;
    try {
      const lease = await api.readNamespacedLease({ name: LEASE_NAME, namespace: this.#o.namespace });
      if (lease.spec?.holderIdentity !== this.#o.identity) return;
      lease.spec = { ...lease.spec, holderIdentity: "", renewTime: new V1MicroTime(0) };
      await api.replaceNamespacedLease({ name: LEASE_NAME, namespace: this.#o.namespace, body: lease });
    } catch {
      // the lease expires by itself
    }
  }
}
