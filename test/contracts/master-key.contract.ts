/**
 * The MasterKey contract, run once per implementation and peer (test/providers/keys/contract.test.ts).
 *
 * What every master key must do: wrap and unwrap a 32-byte data key and a 33-byte Shamir
 * share; survive toMetadata -> fromMetadata; answer another key's enc with null or a typed
 * error, never with bytes; throw a typed error on a tampered enc; keep secrets out of `id`;
 * and fail with KEY_UNAVAILABLE when its service does not answer (a closed port, a small
 * retry bound). Times are not asserted: only that the call settles, with the right code.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { before, describe, test } from "node:test";
import type { ProviderDeps } from "../../providers/keys/index.ts";
import type { MasterKeyType } from "../../providers/keys/key-type.ts";
import type { MasterKey } from "../../src/envelope/sops/master-key.ts";
import { BootsealError, ERROR_CODES } from "../../src/errors.ts";
import { freePort } from "../helpers/ports.ts";

export interface MasterKeyFixture {
  /** The provider, for the fromMetadata round trip. */
  readonly type: MasterKeyType;
  /** The deps `key` was built with (credentials, endpoints). */
  readonly deps: ProviderDeps;
  readonly key: MasterKey;
  /**
   * A key whose enc `key` must not open: another key of the same kind, or for AWS KMS the
   * same key under another encryption context. It may carry its own deps.
   */
  readonly other: MasterKey;
  /** The same kind of key pointed at `127.0.0.1:<port>` where nothing listens; absent for local kinds. */
  readonly unreachable?: (port: number) => MasterKey;
  /** Strings that must never show in `id` (tokens, private keys). */
  readonly secrets?: readonly string[];
}

function isTyped(err: unknown): err is BootsealError {
  return err instanceof BootsealError && ERROR_CODES.includes(err.code);
}

/**
 * Flip one base64 character in the last long base64 run of `enc`: the ciphertext body, not a
 * recipient stanza (a damaged age X25519 stanza is indistinguishable from another recipient's,
 * so it rightly reads as "not mine").
 */
export function tamper(enc: string): string {
  let last: { start: number; length: number } | undefined;
  for (const m of enc.matchAll(/[A-Za-z0-9+/_-]{16,}/g)) last = { start: m.index ?? 0, length: m[0].length };
  assert.ok(last, "enc has a base64 body to tamper with");
  const at = last.start + Math.floor(last.length * 0.6);
  const c = enc[at] as string;
  return enc.slice(0, at) + (c === "A" ? "B" : "A") + enc.slice(at + 1);
}

/** The forms a secret could leak in. */
function leakForms(secret: Uint8Array): string[] {
  const b = Buffer.from(secret);
  return [b.toString("hex"), b.toString("hex").toUpperCase(), b.toString("base64"), b.toString("base64url")];
}

export function masterKeyContract(name: string, factory: () => Promise<MasterKeyFixture>): void {
  describe(`MasterKey contract: ${name}`, () => {
    let f: MasterKeyFixture;
    before(async () => {
      f = await factory();
    });

    for (const size of [32, 33]) {
      test(`wraps and unwraps a ${size}-byte secret`, async () => {
        const secret = new Uint8Array(randomBytes(size));
        const enc = await f.key.wrap(secret);
        assert.equal(typeof enc, "string");
        assert.ok(enc.length > 0);
        for (const form of leakForms(secret)) assert.ok(!enc.includes(form), "enc does not hold the secret");
        assert.deepEqual(await f.key.unwrap(enc), secret);
        assert.equal(f.key.kind, f.type.kind);
        // What the service's upload check (src/envelope/sops/validate.ts) takes for well formed.
        const syntax = f.type.format.encSyntax;
        if (syntax) assert.match(enc, syntax, "enc has the kind's encSyntax");
      });
    }

    test("toMetadata -> fromMetadata keeps the key: same id, and it unwraps", async () => {
      const secret = new Uint8Array(randomBytes(32));
      const enc = await f.key.wrap(secret);
      const created = new Date("2026-01-02T03:04:05.678Z");
      const entry = f.key.toMetadata(enc, created);
      assert.equal(entry.kind, f.key.kind);
      assert.equal(entry.enc, enc);
      assert.equal(entry.fields.get("enc"), enc);
      if (f.type.format.fields.includes("created_at")) {
        assert.equal(entry.fields.get("created_at"), "2026-01-02T03:04:05Z");
      }
      // One identity implementation: the key's id is its kind's identity of its own entry.
      assert.equal(f.key.id, f.type.format.identity(entry));
      const again = f.type.fromMetadata(entry, f.deps);
      assert.equal(again.id, f.key.id);
      assert.deepEqual(await again.unwrap(entry.enc), secret);
    });

    test("another key's enc gives null or a typed error, never bytes", async () => {
      const secret = new Uint8Array(randomBytes(32));
      const enc = await f.other.wrap(secret);
      let result: Uint8Array | null = null;
      try {
        result = await f.key.unwrap(enc);
      } catch (err) {
        assert.ok(isTyped(err), `a BootsealError, got ${String(err)}`);
        assert.notEqual(err.code, "KEY_UNAVAILABLE", "not a transport failure");
        return;
      }
      assert.equal(result, null);
    });

    test("a tampered enc throws a typed error", async () => {
      const enc = await f.key.wrap(new Uint8Array(randomBytes(32)));
      const bad = tamper(enc);
      assert.notEqual(bad, enc);
      await assert.rejects(f.key.unwrap(bad), (err) => {
        assert.ok(isTyped(err), `a BootsealError, got ${String(err)}`);
        assert.notEqual(err.code, "KEY_UNAVAILABLE");
        return true;
      });
    });

    test("id is a public name: no secret in it", async () => {
      assert.ok(f.key.id.length > 0);
      const secret = new Uint8Array(randomBytes(32));
      const enc = await f.key.wrap(secret);
      for (const form of leakForms(secret)) assert.ok(!f.key.id.includes(form));
      assert.ok(!f.key.id.includes(enc), "the id does not carry the enc");
      for (const s of f.secrets ?? []) assert.ok(!f.key.id.includes(s), "the id holds no credential");
      const entry = f.key.toMetadata(enc, new Date());
      for (const s of f.secrets ?? []) {
        for (const v of entry.fields.values())
          assert.ok(!JSON.stringify(v).includes(s), "no credential in metadata");
      }
    });

    test("an unreachable service gives KEY_UNAVAILABLE", async (t) => {
      if (f.unreachable === undefined) {
        // Local kinds (age, PGP) have no service: the contract holds trivially, and says so.
        t.diagnostic(`${name} has no key service`);
        assert.ok(f.key.kind === "age" || f.key.kind === "pgp");
        return;
      }
      const enc = await f.key.wrap(new Uint8Array(randomBytes(32)));
      const dead = f.unreachable(await freePort());
      assert.equal(dead.kind, f.key.kind);
      for (const op of [() => dead.wrap(new Uint8Array(32)), () => dead.unwrap(enc)]) {
        await assert.rejects(op(), (err) => {
          assert.ok(isTyped(err), `a BootsealError, got ${String(err)}`);
          assert.equal(err.code, "KEY_UNAVAILABLE", err.message);
          assert.equal(err.retryable, true);
          return true;
        });
      }
    });
  });
}
