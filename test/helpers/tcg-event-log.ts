/**
 * Builds a TCG crypto-agile event log (PC Client PFP: a Spec ID Event03 record in the SHA-1
 * layout declaring the sha256 bank, then TCG_PCR_EVENT2 records), so a test can extend a
 * software TPM's PCR with the same events and log in with a log that matches it. That the
 * bytes are a real log is checked by tpm2_eventlog (test/service/tpm-event-log.test.ts).
 */
import { createHash } from "node:crypto";

export interface TcgEvent {
  readonly pcr: number;
  readonly type: number;
  /** The sha256 digest the event records (what is extended). */
  readonly digest: Buffer;
  readonly data: Buffer;
}

export const sha256 = (data: string | Buffer): Buffer => createHash("sha256").update(data).digest();

const u32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
};
const u16 = (n: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(n);
  return b;
};

export function tcgEventLog(events: readonly TcgEvent[]): Buffer {
  const specId = Buffer.concat([
    Buffer.from("Spec ID Event03\0", "latin1"),
    u32(0), // platformClass: client
    Buffer.from([0, 2, 0, 2]), // specVersionMinor, specVersionMajor, specErrata, uintnSize (64-bit)
    u32(1),
    u16(0x000b), // sha256
    u16(32),
    Buffer.from([0]), // vendorInfoSize
  ]);
  const header = Buffer.concat([u32(0), u32(0x3), Buffer.alloc(20), u32(specId.length), specId]);
  const records = events.map((e) =>
    Buffer.concat([u32(e.pcr), u32(e.type), u32(1), u16(0x000b), e.digest, u32(e.data.length), e.data]),
  );
  return Buffer.concat([header, ...records]);
}
