/**
 * `kill -9` of the service under load, on the file store and on SeaweedFS: concurrent
 * publishes and status posts, SIGKILL once 40 of them were acknowledged, restart on the same
 * store. Every acknowledged publish is there (config GET 200 with the acknowledged sha256,
 * unless a later publish of the same machine was in flight at the kill: then it is one of the
 * two, never a mix; such a cut publish may have stored its document and not yet its status
 * record), every acknowledged status post is in the history, every stored object
 * parses (configs decrypt, records are JSON), and every machine takes a publish and a status
 * post right after the restart (a lock left by the killed process does not block a writer).
 */
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { GetObjectCommand, ListObjectsV2Command } from "@aws-sdk/client-s3";
import { freePort } from "../helpers/ports.ts";
import { rawS3, seaweedfs } from "../helpers/s3.ts";
import { type Service, startService } from "../helpers/serve-process.ts";
import { faultsFixture, type ServiceStore } from "./fixture.ts";
import { call, decryptWithAge } from "./helpers.ts";

const MACHINES = 8;
const KILL_AFTER_ACKS = 40;
const MAX_OPS_PER_MACHINE = 60;

const fx = faultsFixture("faults-kill9");
const token = randomBytes(24).toString("hex");

interface StoreUnderTest extends ServiceStore {
  /** Every object (reserved `.bootseal-` files left out), and the names of reserved ones. */
  objects(): Promise<{ objects: Map<string, Buffer>; reserved: string[] }>;
}

function fileStore(root: string): StoreUnderTest {
  return {
    store: `file://${root}`,
    extra: [],
    env: {},
    async objects() {
      const objects = new Map<string, Buffer>();
      const reserved: string[] = [];
      for (const e of await readdir(root, { withFileTypes: true, recursive: true })) {
        if (!e.isFile()) continue;
        const rel = join(e.parentPath, e.name).slice(root.length + 1);
        if (e.name.startsWith(".bootseal-")) reserved.push(rel);
        else objects.set(rel, await readFile(join(e.parentPath, e.name)));
      }
      return { objects, reserved };
    },
  };
}

async function seaweedStore(): Promise<StoreUnderTest> {
  const { bucket, store, extra, env } = await fx.bucket("faults-kill9", "k9");
  const s3 = rawS3(seaweedfs());
  return {
    store,
    extra,
    env,
    async objects() {
      const objects = new Map<string, Buffer>();
      const listed = await s3.send(
        new ListObjectsV2Command({ Bucket: bucket, Prefix: "k9/", MaxKeys: 1000 }),
      );
      for (const o of listed.Contents ?? []) {
        const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: o.Key }));
        objects.set((o.Key as string).slice(3), Buffer.from(await got.Body!.transformToByteArray()));
      }
      return { objects, reserved: [] };
    },
  };
}

interface Machine {
  readonly name: string;
  bst: string;
  acked?: { sha256: string; payload: string };
  /** Publishes sent after the last acknowledged one and not acknowledged (cut, or 503). */
  unacked: string[];
  statusAcked: string[];
}

async function killUnderLoad(
  t: import("node:test").TestContext,
  sut: StoreUnderTest,
  label: string,
): Promise<void> {
  const config = await fx.writeConfig(sut, label, token);
  const env = fx.env(sut);
  const port = await freePort();
  let service: Service | undefined = await startService(config, env, port);
  try {
    const url = service.url;
    const machines: Machine[] = [];
    for (let i = 0; i < MACHINES; i++) {
      const name = `m${i}`;
      const payload = `${name} initial\n`;
      const r = await call(`${url}/v1/machines/default/${name}/config`, {
        method: "PUT",
        token,
        body: payload,
      });
      assert.equal(r.status, 201, r.body.toString());
      const b = r.json<{ sha256: string; bootstrapToken: string }>();
      machines.push({
        name,
        bst: b.bootstrapToken,
        acked: { sha256: b.sha256, payload },
        unacked: [],
        statusAcked: [],
      });
    }
    let acks = 0;
    let killed: Promise<void> | undefined;
    const svc = service;
    const ack = () => {
      acks++;
      if (acks === KILL_AFTER_ACKS) killed = svc.kill9();
    };
    await Promise.all(
      machines.map(async (m) => {
        for (let op = 0; op < MAX_OPS_PER_MACHINE; op++) {
          if (op % 4 === 0) {
            const payload = `${m.name} op ${op} ${randomBytes(4).toString("hex")}\n`;
            m.unacked.push(payload);
            const r = await call(`${url}/v1/machines/default/${m.name}/config`, {
              method: "PUT",
              token,
              body: payload,
            });
            if (r.status === 0) return;
            if (r.status === 503) continue; // not acknowledged (a slow store on a loaded machine)
            assert.equal(r.status, 200, r.body.toString());
            const b = r.json<{ sha256: string; bootstrapToken: string }>();
            m.acked = { sha256: b.sha256, payload };
            m.bst = b.bootstrapToken;
            m.unacked = [];
            ack();
          } else {
            const message = `${m.name}-s${op}`;
            const r = await call(`${url}/v1/machines/default/${m.name}/status`, {
              method: "POST",
              token: m.bst,
              contentType: "application/json",
              // A terminal phase: written before its 200 (intermediate ones are held and answered
              // 202, with their own promise: test/faults/storm.test.ts).
              body: JSON.stringify({ phase: "failed", message }),
            });
            if (r.status === 0) return;
            if (r.status === 503) continue;
            // A publish answered 503 may still have replaced the token.
            if (r.status === 401 && m.unacked.length > 0) continue;
            assert.equal(r.status, 200, r.body.toString());
            m.statusAcked.push(message);
            ack();
          }
        }
      }),
    );
    assert.ok(killed, `the service was killed under load (${acks} acknowledged)`);
    await killed;
    assert.equal(service.process.signalCode, "SIGKILL");
    t.diagnostic(`${label}: ${acks} calls acknowledged before the kill`);

    service = await startService(config, env, port);
    for (const m of machines) {
      const got = await call(`${url}/v1/machines/default/${m.name}/config`, { token });
      assert.equal(got.status, 200, `${m.name}: ${got.body.toString()}`);
      const sha = createHash("sha256").update(got.body).digest("hex");
      const plain = (await decryptWithAge(fx.dir, got.body, fx.operator.file)).toString();
      if (m.unacked.length === 0) {
        assert.equal(sha, m.acked?.sha256, `${m.name}: the acknowledged version`);
      } else {
        assert.ok(
          plain === m.acked?.payload || m.unacked.includes(plain),
          `${m.name}: the acknowledged or the in-flight version`,
        );
      }
      const st = await call(`${url}/v1/machines/default/${m.name}/status`, { token });
      assert.equal(st.status, 200);
      const record = st.json<{ config: { sha256: string }; history: Array<{ message?: string }> }>();
      // A publish cut by the kill may have stored its document but not yet its status record
      // (no 2xx was given: the controller publishes again); otherwise the record names it.
      if (m.unacked.length === 0) {
        assert.equal(record.config.sha256, sha, `${m.name}: the status record names the stored version`);
      }
      const messages = new Set(record.history.map((h) => h.message));
      for (const message of m.statusAcked) assert.ok(messages.has(message), `${m.name}: ${message} kept`);
    }
    const { objects, reserved } = await sut.objects();
    t.diagnostic(
      `${label}: ${objects.size} objects, ${reserved.length} reserved files left by the kill (${reserved.join(", ")})`,
    );
    for (const [key, body] of objects) {
      if (key.startsWith("configs/")) await decryptWithAge(fx.dir, body, fx.operator.file);
      else JSON.parse(body.toString());
    }
    // A writer right after the restart is not blocked by whatever the killed process held.
    for (const m of machines) {
      const r = await call(`${url}/v1/machines/default/${m.name}/config`, {
        method: "PUT",
        token,
        body: "after\n",
      });
      assert.equal(r.status, 200, `${m.name}: ${r.body.toString()}`);
      const bst = r.json<{ bootstrapToken: string }>().bootstrapToken;
      const s = await call(`${url}/v1/machines/default/${m.name}/status`, {
        method: "POST",
        token: bst,
        contentType: "application/json",
        body: JSON.stringify({ phase: "succeeded" }),
      });
      assert.equal(s.status, 200, s.body.toString());
    }
  } finally {
    await service?.stop();
  }
}

test("kill -9 under load, file store: nothing acknowledged is lost, nothing half-written", {
  timeout: 600_000,
}, async (t) => {
  await killUnderLoad(t, fileStore(join(fx.dir, "store")), "file");
});

test("kill -9 under load, SeaweedFS: nothing acknowledged is lost, nothing half-written", {
  timeout: 600_000,
}, async (t) => {
  await killUnderLoad(t, await seaweedStore(), "seaweedfs");
});
