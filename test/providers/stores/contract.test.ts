/**
 * The ObjectStore contract on every implementation and peer: memory, file (a temporary
 * directory), s3 on SeaweedFS, s3 on moto, gs on fake-gcs-server. Buckets are created here
 * (names start with store-contract-) and removed afterwards.
 */

import { openStore } from "../../../providers/stores/index.ts";
import { createMemoryStore } from "../../../providers/stores/memory.ts";
import { objectStoreContract } from "../../contracts/object-store.contract.ts";
import { gcsBucket, s3Bucket, s3Peers, tempDir } from "./peer-buckets.ts";

const PAGE = 10; // small pages, so listing 25 objects crosses pages on S3 and GCS

objectStoreContract("memory", async () => createMemoryStore());

objectStoreContract("file", async () => {
  const dir = await tempDir();
  return openStore(`file://${dir}/store`);
});

for (const peer of s3Peers()) {
  objectStoreContract(`s3 on ${peer.name}`, async () => {
    const bucket = await s3Bucket(peer);
    return openStore(`s3://${bucket}/contract/prefix`, {
      s3: { endpoint: peer.endpoint, credentials: peer.credentials, pageSize: PAGE },
      env: {},
    });
  });
}

objectStoreContract("gs on fake-gcs-server", async () => {
  const { bucket, apiEndpoint } = await gcsBucket();
  return openStore(`gs://${bucket}/contract/prefix`, {
    gcs: { apiEndpoint, projectId: "test", pageSize: PAGE },
  });
});
