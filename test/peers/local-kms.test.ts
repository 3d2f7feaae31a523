/** Smoke test of local-kms with @aws-sdk/client-kms. */
import { peer } from "../helpers/peers.ts";
import { kmsSmoke } from "./kms-smoke.ts";

// local-kms refuses a wrong or missing encryption context with 400 InvalidCiphertextException, as AWS does.
kmsSmoke({
  server: "local-kms",
  endpoint: peer("KMS_LOCAL_ENDPOINT"),
  wrongContextError: "InvalidCiphertextException",
});
