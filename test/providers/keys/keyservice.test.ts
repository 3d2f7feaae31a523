/**
 * bootseal's key service server and client in one process, over real gRPC on loopback:
 * wrap and unwrap through it, sops's status codes for what it refuses, the order local
 * first then the remotes, and a service that has gone away. Against the real sops:
 * test/interop/sops-keyservice.test.ts.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, test } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { keysFromUserInput, keyTypeOf, type ProviderDeps } from "../../../providers/keys/index.ts";
import {
  keyServicesFrom,
  parseKeyServiceUri,
  throughKeyServices,
} from "../../../providers/keys/keyservice-client.ts";
import { type RunningKeyService, startKeyService } from "../../../providers/keys/keyservice-server.ts";
import { encodeRequest, KEY_MESSAGES, wireKeyOf } from "../../../providers/keys/keyservice-wire.ts";
import type { KeyEntry, MasterKey } from "../../../src/envelope/sops/master-key.ts";
import { isBootsealError } from "../../../src/errors.ts";

const T = { timeout: 60_000 };
let recipient: string;
let deps: ProviderDeps;
let svc: RunningKeyService;
const log: string[] = [];
let refuse = false;

before(async () => {
  const identity = await generateX25519Identity();
  recipient = await identityToRecipient(identity);
  deps = { env: { SOPS_AGE_KEY: identity } };
  svc = await startKeyService("tcp", "127.0.0.1:0", {
    keyFor: (entry: KeyEntry) => {
      const type = keyTypeOf(entry.kind);
      assert.ok(type);
      return type.fromMetadata(entry, deps);
    },
    confirm: async () => !refuse,
    log: (line) => log.push(line),
  });
});
after(() => svc?.close());

/** An age key of this process with no identity here: only the service can open its wraps. */
const keyless = (): MasterKey => keysFromUserInput("age", recipient, { env: {} })[0] as MasterKey;

function rawCall(method: string, request: Uint8Array): Promise<grpc.ServiceError | null> {
  const client = new grpc.Client(parseKeyServiceUri(svc.url).target, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(
      `/KeyService/${method}`,
      (b: Uint8Array) => Buffer.from(b),
      (b: Buffer) => b,
      request,
      (err) => {
        client.close();
        resolve(err);
      },
    );
  });
}

test("a data key wrapped and unwrapped through the service alone", T, async () => {
  assert.match(svc.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
  const key = throughKeyServices(keyless(), keyServicesFrom([svc.url], false));
  const dataKey = randomBytes(32);
  const enc = await key.wrap(dataKey);
  assert.match(enc, /^-----BEGIN AGE ENCRYPTED FILE-----/);
  assert.deepEqual(Buffer.from((await key.unwrap(enc)) ?? []), dataKey);
  // Without the service, this process has no identity for it.
  assert.equal(await keyless().unwrap(enc), null);
  assert.ok(log.some((l) => l === `decrypt request for ${recipient}: answered`));
});

test("local first: a local wrap never asks the service; a local miss does", T, async () => {
  const both = throughKeyServices(keyless(), keyServicesFrom([svc.url], true));
  const before = log.length;
  const enc = await both.wrap(randomBytes(32));
  assert.equal(log.length, before, "the local age key wrapped it");
  assert.ok(await both.unwrap(enc));
  assert.equal(log.length, before + 1, "the local key had no identity: the service opened it");
});

test(
  "sops's status codes: no key NOT_FOUND, unknown key type NOT_FOUND, malformed INVALID_ARGUMENT",
  T,
  async () => {
    const noKey = await rawCall("Encrypt", encodeRequest({ key: null, data: randomBytes(32) }));
    assert.equal(noKey?.code, grpc.status.NOT_FOUND);
    assert.equal(noKey?.details, "Must provide a key");
    // hckms keys reach their provider now (a key id without a region is its BAD_INPUT).
    const hckms = KEY_MESSAGES.find((m) => m.oneof === "hckms_key");
    assert.ok(hckms);
    const refused = await rawCall(
      "Decrypt",
      encodeRequest({ key: { message: hckms, fields: new Map([["key_id", "k"]]) }, data: Buffer.from("x") }),
    );
    assert.notEqual(refused?.details, "Unknown key type");
    assert.match(String(refused?.details), /invalid key ID format/);
    const malformed = await rawCall("Encrypt", Uint8Array.from([0x0a, 0x7f]));
    assert.equal(malformed?.code, grpc.status.INVALID_ARGUMENT);
  },
);

test(
  "a key the service cannot open: UNKNOWN with the key's error, seen as this key's failure",
  T,
  async () => {
    const other = await identityToRecipient(await generateX25519Identity());
    const otherKey = keysFromUserInput("age", other, { env: {} })[0] as MasterKey;
    const enc = await otherKey.wrap(randomBytes(32));
    const remote = throughKeyServices(otherKey, keyServicesFrom([svc.url], false));
    await assert.rejects(remote.unwrap(enc), (err: unknown) => {
      assert.ok(isBootsealError(err));
      assert.equal(err.code, "NO_KEY_AVAILABLE");
      assert.match(err.message, new RegExp(`key service ${svc.url}: UNKNOWN: `));
      return true;
    });
    const status = await rawCall(
      "Decrypt",
      encodeRequest({ key: wireKeyOf(otherKey.toMetadata("", new Date())), data: Buffer.from(enc) }),
    );
    assert.equal(status?.code, grpc.status.UNKNOWN);
  },
);

test("--prompt answered no: PERMISSION_DENIED, KEY_ACCESS_DENIED here", T, async () => {
  refuse = true;
  try {
    const key = throughKeyServices(keyless(), keyServicesFrom([svc.url], false));
    await assert.rejects(key.wrap(randomBytes(32)), (err: unknown) => {
      assert.ok(isBootsealError(err));
      assert.equal(err.code, "KEY_ACCESS_DENIED");
      assert.match(err.message, /PERMISSION_DENIED: Request rejected by user/);
      return true;
    });
  } finally {
    refuse = false;
  }
});

test("every service failing: each one's reason, the last one's code", T, async () => {
  const stopped = await startKeyService("tcp", "127.0.0.1:0", { keyFor: () => keyless() });
  await stopped.close();
  const key = throughKeyServices(keyless(), keyServicesFrom([svc.url, stopped.url], false));
  refuse = true;
  try {
    await assert.rejects(key.wrap(randomBytes(32)), (err: unknown) => {
      assert.ok(isBootsealError(err));
      assert.equal(err.code, "KEY_UNAVAILABLE");
      assert.ok(err.message.includes(`key service ${svc.url}: PERMISSION_DENIED`), err.message);
      assert.ok(err.message.includes(`key service ${stopped.url}: UNAVAILABLE`), err.message);
      return true;
    });
  } finally {
    refuse = false;
  }
  const none = throughKeyServices(keyless(), keyServicesFrom([], false));
  await assert.rejects(
    none.wrap(randomBytes(32)),
    (err: unknown) => isBootsealError(err) && err.code === "USAGE",
  );
});

test("URIs: sops's forms, everything else USAGE", () => {
  assert.deepEqual(parseKeyServiceUri("tcp://127.0.0.1:5000").target, "127.0.0.1:5000");
  assert.deepEqual(parseKeyServiceUri("tcp://[::1]:5000").target, "[::1]:5000");
  assert.deepEqual(parseKeyServiceUri("unix:///run/sops.sock").target, "unix:///run/sops.sock");
  for (const bad of [
    "127.0.0.1:5000",
    "http://h:1",
    "tcp://h",
    "tcp://:5000",
    "unix://rel.sock",
    "unix://",
  ]) {
    assert.throws(
      () => parseKeyServiceUri(bad),
      (err: unknown) => isBootsealError(err) && err.code === "USAGE",
      bad,
    );
  }
});

test("listening: an unknown network is USAGE, an address in use IO_ERROR", T, async () => {
  const keyFor = () => keyless();
  await assert.rejects(startKeyService("udp", "127.0.0.1:0", { keyFor }), (err: unknown) => {
    return isBootsealError(err) && err.code === "USAGE";
  });
  const port = svc.url.split(":").at(-1) as string;
  await assert.rejects(startKeyService("tcp", `127.0.0.1:${port}`, { keyFor }), (err: unknown) => {
    return isBootsealError(err) && err.code === "IO_ERROR";
  });
});
