/**
 * The key service's hand-written wire format against protobufjs (through @grpc/proto-loader
 * reading providers/keys/keyservice.proto): the same names and numbers, and bytes each side
 * reads the way the other wrote them. The interop suite checks the same against sops itself.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { loadSync } from "@grpc/proto-loader";
import { KEY_TYPES } from "../../../providers/keys/index.ts";
import {
  decodeRequest,
  decodeResponse,
  encodeRequest,
  encodeResponse,
  entryOf,
  KEY_MESSAGES,
  type WireKey,
  wireKeyOf,
} from "../../../providers/keys/keyservice-wire.ts";
import { isBootsealError } from "../../../src/errors.ts";

const PROTO = fileURLToPath(new URL("../../../providers/keys/keyservice.proto", import.meta.url));
const def = loadSync(PROTO, { keepCase: true, defaults: false, oneofs: true });

interface FieldDescriptor {
  readonly name: string;
  readonly number: number;
  readonly typeName: string;
  readonly label: string;
}
const fieldsOf = (message: string): FieldDescriptor[] =>
  (def[message] as unknown as { type: { field: FieldDescriptor[] } }).type.field;

type Method = {
  path: string;
  requestSerialize(v: unknown): Buffer;
  requestDeserialize(b: Buffer): Record<string, unknown>;
  responseSerialize(v: unknown): Buffer;
  responseDeserialize(b: Buffer): Record<string, unknown>;
};
const service = def.KeyService as unknown as { Encrypt: Method; Decrypt: Method };

test("keyservice.proto: service KeyService without a package, Encrypt and Decrypt", () => {
  assert.equal(service.Encrypt.path, "/KeyService/Encrypt");
  assert.equal(service.Decrypt.path, "/KeyService/Decrypt");
  for (const [message, data] of [
    ["EncryptRequest", "plaintext"],
    ["DecryptRequest", "ciphertext"],
  ]) {
    assert.deepEqual(
      fieldsOf(message as string).map((f) => [f.name, f.number]),
      [
        ["key", 1],
        [data, 2],
      ],
    );
  }
});

test("KEY_MESSAGES has the .proto's Key oneof and every message's field numbers", () => {
  assert.deepEqual(
    fieldsOf("Key").map((f) => [f.name, f.number, f.typeName]),
    KEY_MESSAGES.map((m) => [m.oneof, m.number, m.message]),
  );
  for (const m of KEY_MESSAGES) {
    assert.deepEqual(
      fieldsOf(m.message).map((f) => [f.name, f.number, f.label === "LABEL_REPEATED"]),
      m.fields.map((f) => [f.name, f.number, f.map === true]),
      m.message,
    );
  }
});

test("every registered sops kind has a key message whose fields are metadata fields of the kind", () => {
  // tpm is bootseal's own kind: sops's Key oneof has no message for it.
  assert.throws(
    () => wireKeyOf({ kind: "tpm", enc: "", fields: new Map() }),
    (err) => isBootsealError(err) && err.code === "UNSUPPORTED",
  );
  for (const type of KEY_TYPES) {
    if (type.kind === "tpm") continue;
    const m = KEY_MESSAGES.find((k) => k.kind === type.kind);
    assert.ok(m, `${type.kind} has no key service message`);
    for (const f of m.fields) assert.ok(type.format.fields.includes(f.entry), `${type.kind}.${f.entry}`);
  }
});

/** A value for every field of every message, and the object protobufjs uses for it. */
function samples(): { key: WireKey; object: Record<string, unknown> }[] {
  return KEY_MESSAGES.map((m) => {
    const fields = new Map<string, string | Record<string, string>>();
    const inner: Record<string, unknown> = {};
    for (const f of m.fields) {
      const value = f.map ? { "bootseal-machine": "ns/name", ünï: "çødé" } : `${f.name}-value-é`;
      fields.set(f.entry, value);
      inner[f.name] = value;
    }
    return { key: { message: m, fields }, object: { [m.oneof]: inner } };
  });
}

test("our requests decode with protobufjs, and its requests decode with ours", () => {
  const data = Buffer.from([0, 1, 2, 255, 254]);
  for (const { key, object } of samples()) {
    for (const [method, dataField] of [
      [service.Encrypt, "plaintext"],
      [service.Decrypt, "ciphertext"],
    ] as const) {
      const theirs = method.requestDeserialize(Buffer.from(encodeRequest({ key, data })));
      assert.deepEqual(theirs.key, { ...object, key_type: key.message.oneof });
      assert.deepEqual(theirs[dataField], data);

      const ours = decodeRequest(method.requestSerialize({ key: object, [dataField]: data }));
      assert.equal(ours.key?.message, key.message);
      assert.deepEqual(ours.key?.fields, key.fields);
      assert.deepEqual(Buffer.from(ours.data), data);
    }
  }
});

test("responses both ways, and an empty field reads as empty", () => {
  const bytes = new TextEncoder().encode("-----BEGIN AGE ENCRYPTED FILE-----\n...");
  assert.deepEqual(
    service.Encrypt.responseDeserialize(Buffer.from(encodeResponse(bytes))).ciphertext,
    Buffer.from(bytes),
  );
  assert.deepEqual(
    Buffer.from(decodeResponse(service.Decrypt.responseSerialize({ plaintext: bytes }))),
    Buffer.from(bytes),
  );
  assert.equal(decodeResponse(new Uint8Array(0)).length, 0);
});

test("a request without a key, or with a key type no one knows, has key null", () => {
  assert.equal(decodeRequest(service.Encrypt.requestSerialize({ plaintext: Buffer.from("x") })).key, null);
  // Field 99 of Key: an unknown field, skipped as protobuf does.
  const unknown = Uint8Array.from([0x0a, 0x04, 0x9a, 0x06, 0x01, 0x41, 0x12, 0x01, 0x78]);
  const request = decodeRequest(unknown);
  assert.equal(request.key, null);
  assert.deepEqual(Buffer.from(request.data), Buffer.from("x"));
});

test("malformed bytes are BAD_INPUT, never a crash or a silent success", () => {
  const good = encodeRequest({ key: samples()[5]?.key ?? null, data: Buffer.from("secret") });
  for (const bad of [
    good.subarray(0, good.length - 1),
    Uint8Array.from([0x0a, 0xff]),
    Uint8Array.from([0x0b]),
  ]) {
    assert.throws(
      () => decodeRequest(bad),
      (err: unknown) => isBootsealError(err) && err.code === "BAD_INPUT",
    );
  }
});

test("entries: wireKeyOf keeps only the message's fields; entryOf gives the registry kind back", () => {
  const entry = {
    kind: "pgp",
    enc: "ignored",
    fields: new Map([
      ["fp", "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4"],
      ["created_at", "2024-01-01T00:00:00Z"],
    ]),
  };
  const key = wireKeyOf(entry);
  assert.deepEqual([...key.fields], [["fp", "FBC7B9E2A4F9289AC0C1D4843D16CEE4A27381B4"]]);
  assert.deepEqual(entryOf(key, "ENC"), { kind: "pgp", enc: "ENC", fields: key.fields });
  // A message this build has no provider for (none now: hckms has one).
  const noProvider = { ...(KEY_MESSAGES[0] as (typeof KEY_MESSAGES)[number]), kind: null };
  assert.equal(entryOf({ message: noProvider, fields: new Map() }, ""), null);
  const hckms = KEY_MESSAGES.find((m) => m.oneof === "hckms_key");
  assert.deepEqual(
    entryOf({ message: hckms as (typeof KEY_MESSAGES)[number], fields: new Map([["key_id", "r:u"]]) }, "E"),
    {
      kind: "hckms",
      enc: "E",
      fields: new Map([["key_id", "r:u"]]),
    },
  );
  assert.throws(
    () => wireKeyOf({ kind: "no-such-kind", enc: "", fields: new Map() }),
    (err: unknown) => isBootsealError(err) && err.code === "UNSUPPORTED",
  );
});
