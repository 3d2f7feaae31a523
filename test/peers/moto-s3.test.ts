/** Smoke test of moto's S3 with @aws-sdk/client-s3. */
import { peer } from "../helpers/peers.ts";
import { s3Smoke } from "./s3-smoke.ts";

s3Smoke({
  server: "moto",
  endpoint: peer("S3_MOTO_ENDPOINT"),
  accessKeyId: "testing",
  secretAccessKey: "testing",
  // moto 5.2.5 answers a lost conditional put with 412 PreconditionFailed, and If-Match on a
  // key that does not exist with 404 NoSuchKey (as AWS S3 documents).
  lostRace: { status: 412, name: "PreconditionFailed" },
  ifMatchMissing: { status: 404, name: "NoSuchKey" },
});
