import assert from "node:assert/strict";
import { test } from "node:test";
import { isBootsealError } from "../../src/errors.ts";
import { stubOrigin } from "../../src/service/stub-origin.ts";

test("publicUrl is the stub's service URL whatever the listener", () => {
  const url = "https://bootseal.example.net:8443";
  assert.equal(stubOrigin(url, "http", { localAddress: "10.1.2.3", localPort: 7480 }), url);
  assert.equal(stubOrigin(url, "http", { localAddress: "127.0.0.1", localPort: 7480 }), url);
});

test("without publicUrl a loopback listener names its own address (IPv4, IPv6, mapped)", () => {
  assert.equal(
    stubOrigin(undefined, "http", { localAddress: "127.0.0.1", localPort: 7480 }),
    "http://127.0.0.1:7480",
  );
  assert.equal(
    stubOrigin(undefined, "https", { localAddress: "127.8.9.10", localPort: 1 }),
    "https://127.8.9.10:1",
  );
  assert.equal(stubOrigin(undefined, "http", { localAddress: "::1", localPort: 7480 }), "http://[::1]:7480");
  assert.equal(
    stubOrigin(undefined, "http", { localAddress: "::ffff:127.0.0.1", localPort: 7480 }),
    "http://127.0.0.1:7480",
  );
});

test("without publicUrl any other listener refuses, naming the setting", () => {
  for (const localAddress of [
    "10.0.0.5",
    "192.168.1.1",
    "::ffff:10.0.0.5",
    "fe80::1",
    "2001:db8::1",
    "0.0.0.0",
  ]) {
    assert.throws(
      () => stubOrigin(undefined, "http", { localAddress, localPort: 7480 }),
      (err: unknown) => isBootsealError(err) && err.code === "UNSUPPORTED" && /publicUrl/.test(err.message),
      localAddress,
    );
  }
});
