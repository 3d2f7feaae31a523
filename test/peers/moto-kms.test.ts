/** Smoke test of moto's KMS with @aws-sdk/client-kms. */
import { peer } from "../helpers/peers.ts";
import { kmsSmoke } from "./kms-smoke.ts";

// moto 5.2.5 refuses a wrong or missing encryption context with 400 InvalidCiphertextException, as AWS does.
kmsSmoke({
  server: "moto",
  endpoint: peer("KMS_MOTO_ENDPOINT"),
  wrongContextError: "InvalidCiphertextException",
});
