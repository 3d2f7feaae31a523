/** Smoke test of SeaweedFS's S3 gateway (weed mini) with @aws-sdk/client-s3. */
import { peer } from "../helpers/peers.ts";
import { s3Smoke } from "./s3-smoke.ts";

s3Smoke({
  server: "seaweedfs",
  endpoint: peer("S3_SEAWEEDFS_ENDPOINT"),
  accessKeyId: peer("S3_SEAWEEDFS_ACCESS_KEY"),
  secretAccessKey: peer("S3_SEAWEEDFS_SECRET_KEY"),
  // SeaweedFS 4.48 answers every failed precondition with 412 PreconditionFailed, also
  // If-Match on a key that does not exist.
  lostRace: { status: 412, name: "PreconditionFailed" },
  ifMatchMissing: { status: 412, name: "PreconditionFailed" },
});
