/**
 * A separate PROCESS racing on a file store (spawned by file.test.ts). argv[2] is JSON:
 * {dir, id, startAt, mode: "create" | "counter", rounds}. It waits until startAt so that all
 * workers start together, then prints one JSON line with what it won.
 */
import { argv } from "node:process";
import { setTimeout as sleep } from "node:timers/promises";
import { FileStore } from "../../../providers/stores/file.ts";
import { isBootsealError } from "../../../src/errors.ts";

interface Job {
  dir: string;
  id: number;
  startAt: number;
  mode: "create" | "counter";
  rounds: number;
}

const job = JSON.parse(argv[2] ?? "{}") as Job;
const store = new FileStore(job.dir);
const enc = (s: string) => new TextEncoder().encode(s);

await sleep(Math.max(0, job.startAt - Date.now()));

if (job.mode === "create") {
  const won: number[] = [];
  let lost = 0;
  for (let r = 0; r < job.rounds; r++) {
    // Round r starts at the same instant in every worker, so each key is really fought over.
    await sleep(Math.max(0, job.startAt + r * 40 - Date.now()));
    try {
      await store.put(`race/key-${r}`, enc(`worker-${job.id}`), { ifNoneMatch: "*" });
      won.push(r);
    } catch (err) {
      if (!isBootsealError(err) || err.code !== "PRECONDITION_FAILED") throw err;
      lost++;
    }
  }
  console.log(JSON.stringify({ won, lost }));
} else {
  let conflicts = 0;
  for (let i = 0; i < job.rounds; ) {
    const current = await store.get("counter");
    if (!current) throw new Error("counter missing");
    const next = Number(new TextDecoder().decode(current.body)) + 1;
    try {
      await store.put("counter", enc(String(next)), { ifMatch: current.etag });
      i++;
    } catch (err) {
      if (!isBootsealError(err) || err.code !== "PRECONDITION_FAILED") throw err;
      conflicts++;
    }
  }
  console.log(JSON.stringify({ conflicts }));
}
