/**
 * Smoke test of the `moto-sts` peer: a moto that checks SigV4 signatures, as AWS STS does.
 * The admin key its set-up made is accepted; a made-up key and a request changed after
 * signing are refused, with AWS's error codes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { checkingMoto, element, motoCall } from "../helpers/moto-iam.ts";

const GET_CALLER_IDENTITY = { Action: "GetCallerIdentity", Version: "2011-06-15" };

test("moto-sts answers GetCallerIdentity for the admin key with its user ARN", async () => {
  const { status, text } = await motoCall(checkingMoto(), "sts", GET_CALLER_IDENTITY);
  assert.equal(status, 200, text);
  assert.match(element(text, "Arn"), /^arn:aws:iam::\d{12}:user\/bootseal-admin$/);
});

test("moto-sts refuses a key it never issued (InvalidClientTokenId)", async () => {
  const moto = {
    ...checkingMoto(),
    credentials: { accessKeyId: "AKIAMADEUP0000000000", secretAccessKey: "x" },
  };
  const { status, text } = await motoCall(moto, "sts", GET_CALLER_IDENTITY);
  assert.equal(status, 403, text);
  assert.match(text, /<Code>InvalidClientTokenId<\/Code>/);
});

test("moto-sts refuses the right key with the wrong secret (SignatureDoesNotMatch)", async () => {
  const real = checkingMoto();
  const moto = { ...real, credentials: { ...real.credentials, secretAccessKey: "not-the-secret" } };
  const { status, text } = await motoCall(moto, "sts", GET_CALLER_IDENTITY);
  assert.equal(status, 403, text);
  assert.match(text, /<Code>SignatureDoesNotMatch<\/Code>/);
});
