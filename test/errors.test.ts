import assert from "node:assert/strict";
import { test } from "node:test";
import { BootsealError, ERROR_CODES, NoKeyAvailableError } from "../src/errors.ts";

test("BootsealError carries its code and retryability", () => {
  const e = new BootsealError("STORE_UNAVAILABLE", "store down");
  assert.equal(e.code, "STORE_UNAVAILABLE");
  assert.equal(e.retryable, true);
  assert.equal(new BootsealError("BAD_INPUT", "x").retryable, false);
  assert.equal(new Set(ERROR_CODES).size, ERROR_CODES.length);
});

test("NoKeyAvailableError lists each key's failure", () => {
  const e = new NoKeyAvailableError("no key could open the data key", [
    { keyId: "age1abc", reason: "no identity" },
  ]);
  assert.equal(e.code, "NO_KEY_AVAILABLE");
  assert.match(e.message, /age1abc: no identity/);
});
