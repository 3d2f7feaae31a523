/**
 * The RE2 features sops users write in encrypted_regex & co. and path_regex, against a table
 * of Go's regexp answers (./re2-cases.ts). re2-sops.test.ts checks the same table against the
 * real sops.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { compileRegex, compileRule } from "../../../src/envelope/sops/walk.ts";
import { CASES, REFUSED } from "./re2-cases.ts";

describe("Go RE2 semantics (re2js)", () => {
  for (const [pattern, input, want] of CASES) {
    test(`${pattern} on ${JSON.stringify(input)} -> ${want}`, () =>
      assert.equal(compileRegex(pattern).test(input), want));
  }
  for (const [pattern] of REFUSED) {
    test(`refuses ${pattern} with BAD_INPUT and Go's reason`, () =>
      assert.throws(() => compileRegex(pattern), {
        code: "BAD_INPUT",
        message: /^Invalid regular expression: error parsing regexp: /,
      }));
  }
  test("a selector's remembered answers equal fresh ones", () => {
    const select = compileRule({ kind: "encrypted_regex", value: "^(a|b)$" });
    const paths = [["a"], ["x", "b"], ["a"], ["x"], ["x", "b"], ["ab"]];
    const first = paths.map((p) => select(p, [], false));
    assert.deepEqual(first, [true, true, true, false, true, false]);
    assert.deepEqual(
      paths.map((p) => select(p, [], false)),
      first,
    );
  });
});
