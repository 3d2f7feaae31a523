/**
 * YAML edge cases of issue #15 against what the real sops 3.13.3 prints for them (`sops
 * encrypt` then `sops decrypt`; the pairs below were recorded from it, and
 * test/interop/sops-yaml-edge.test.ts checks them live): comments before empty list entries
 * and dedented comments after a list, `%YAML`/`%TAG` directives, and the directives go-yaml
 * (so sops) refuses.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { yamlCodec } from "../../../../src/envelope/sops/codecs/yaml.ts";
import { parseYaml, parseYamlGeneral } from "../../../../src/envelope/sops/codecs/yaml-parse.ts";
import { BootsealError } from "../../../../src/errors.ts";

const utf8 = new TextEncoder();
const roundTrip = (text: string): string =>
  new TextDecoder().decode(yamlCodec.emitPlain(yamlCodec.parsePlain(utf8.encode(text))));

/** [plaintext, what sops 3.13.3 decrypts its own encryption of it to]. */
const SOPS_3_13_3: readonly (readonly [string, string])[] = [
  [
    "list:\n  - x\n  # c\n  -\n  # d\n  -\n  - y\n",
    'list:\n    - x\n    - null\n    - null\n    # c\n    # d\n    - "y"\n',
  ],
  ["list:\n  # c\n  -\nb: 1\n", "list:\n    - null\n# c\nb: 1\n"],
  ["list:\n  # c\n  -\n", "list:\n    - null\n"],
  ["a:\n  - k: v\n  # tail\n", "a:\n    - k: v\n# tail\n"],
  ["a:\n  - - x\n  # tail\n", "a:\n    - - x\n# tail\n"],
  ["x:\n  - - k: v\n    # tail\n", "x:\n    - - k: v\n# tail\n"],
  ["a:\n  - x\n  # tail\n", "a:\n    - x\n    # tail\n"],
  ["a:\n  - k: v\n  # tail\nb: 1\n", "a:\n    - k: v\n      # tail\nb: 1\n"],
  ["a:\n  - k: v\n  # tail\n\nb: 1\n", "a:\n    - k: v\n# tail\nb: 1\n"],
  ["a:\n  # c\n  - ~\n", "a:\n    # c\n    - null\n"],
  ["a:\n  # c\n  - !!str\n  - x\n", 'a:\n    - ""\n    # c\n    - x\n'],
  ["%YAML 1.1 # c\n---\na: 1\n", "a: 1\n"],
  [
    '%TAG !e! tag:yaml.org,2002:\n---\na: !e!int "5"\nb: !<tag:yaml.org,2002:bool> "true"\nc: !e!str 7\n',
    'a: 5\nb: true\nc: "7"\n',
  ],
  ["%TAG !e! tag:example.com,2000:\n---\na: !e!foo 7\n", 'a: "7"\n'],
  ['%TAG !e! tag:yaml.org,2002:\n---\na: 1\n---\nb: !!int "3"\n', "a: 1\n---\nb: 3\n"],
];

describe("YAML edge cases read and written as sops 3.13.3 does", () => {
  for (const [input, expected] of SOPS_3_13_3) {
    test(JSON.stringify(input), () => {
      assert.equal(roundTrip(input), expected);
      // The fast path (when it takes the input) and the general parser agree.
      assert.deepEqual(parseYaml(input), parseYamlGeneral(input));
    });
  }
});

describe("directives go-yaml refuses are BAD_INPUT", () => {
  const refused: [string, RegExp][] = [
    ["%YAML 1.2\n---\na: 1\n", /found incompatible YAML document/],
    ["%YAML 2.0\n---\na: 1\n", /found incompatible YAML document/],
    ["%YAML 1.1\n%YAML 1.1\n---\na: 1\n", /found duplicate %YAML directive/],
    ["%TAG !e! tag:x,2000:\n%TAG !e! tag:y,2000:\n---\na: 1\n", /found duplicate %TAG directive/],
    ["%FOO bar\n---\na: 1\n", /found unknown directive name/],
    ["%YAML 1.1\n---\na: 1\n...\n%YAML 1.2\n---\nb: 2\n", /line 5: found incompatible YAML document/],
  ];
  for (const [input, message] of refused) {
    test(JSON.stringify(input), () => {
      for (const parse of [() => yamlCodec.parsePlain(utf8.encode(input)), () => parseYamlGeneral(input)]) {
        assert.throws(
          parse,
          (err: unknown) =>
            err instanceof BootsealError && err.code === "BAD_INPUT" && message.test(err.message),
        );
      }
    });
  }

  test("an encrypted document with one is refused before its metadata is read", () => {
    const doc =
      "%YAML 1.2\n---\na: ENC[AES256_GCM,data:AA==,iv:AA==,tag:AA==,type:str]\nsops:\n    version: 3.13.3\n";
    assert.throws(() => yamlCodec.parseEncrypted(utf8.encode(doc)), { code: "BAD_INPUT" });
  });

  test("%YAML 1.1 is accepted, and %TAG handles hold for their document only", () => {
    assert.equal(roundTrip("%YAML 1.1\n---\na: 1\n"), "a: 1\n");
    assert.throws(() => roundTrip("%TAG !e! tag:yaml.org,2002:\n---\na: 1\n---\nb: !e!int 5\n"), {
      code: "BAD_INPUT",
    });
  });
});
