/**
 * A TPM measured-boot event log (TCG PC Client Platform Firmware Profile, the crypto-agile
 * format Linux exposes as /sys/kernel/security/tpm0/binary_bios_measurements) parsed and
 * replayed into the PCR values it claims, sha256 bank. Pure: bytes in, events and PCR values
 * out; the `tpm` login compares the replay with the quote (identity/tpm.ts).
 *
 * Why our own parser: no JavaScript library for the format is maintained, and it is small: a
 * first event in the SHA-1 layout (TCG_PCClientPCREvent) carrying the "Spec ID Event03"
 * structure that lists each bank's digest size, then TCG_PCR_EVENT2 records (PCR index, event
 * type, one digest per bank, event data), all little-endian. Tests replay real logs (GCE,
 * Fedora, Arch) and compare with tpm2-tools' `tpm2_eventlog`, an independent implementation.
 */
import { createHash } from "node:crypto";
import { TPM_EVENT_LOG_MAX_BYTES } from "../../machine/identity-login.ts";

export const EV_NO_ACTION = 0x3;
export const EV_SEPARATOR = 0x4;
const TPM_ALG_SHA256 = 0x000b;
const SPEC_ID_SIGNATURE = "Spec ID Event03\0";
const STARTUP_LOCALITY_SIGNATURE = "StartupLocality\0";
/** Bounds: a real UEFI log has hundreds of events of at most a few KiB each. */
const MAX_EVENTS = 4096;
const MAX_BANKS = 8;

export class EventLogError extends Error {}

export interface LoggedEvent {
  readonly pcr: number;
  readonly type: number;
  /** The event's sha256-bank digest (what was extended), hex. */
  readonly sha256: string;
}

export interface ReplayedLog {
  /** Every event that extends a PCR (EV_NO_ACTION records are not extended), in log order. */
  readonly events: readonly LoggedEvent[];
  /** PCR index -> its sha256 value after the log, for the PCRs the log extends (hex). */
  readonly pcrs: ReadonlyMap<number, string>;
}

class Reader {
  offset = 0;
  readonly bytes: Buffer;
  constructor(bytes: Buffer) {
    this.bytes = bytes;
  }
  need(n: number, what: string): void {
    if (n < 0 || this.offset + n > this.bytes.length) throw new EventLogError(`${what}: the log ends early`);
  }
  u8(what: string): number {
    this.need(1, what);
    return this.bytes.readUInt8(this.offset++);
  }
  u16(what: string): number {
    this.need(2, what);
    const v = this.bytes.readUInt16LE(this.offset);
    this.offset += 2;
    return v;
  }
  u32(what: string): number {
    this.need(4, what);
    const v = this.bytes.readUInt32LE(this.offset);
    this.offset += 4;
    return v;
  }
  take(n: number, what: string): Buffer {
    this.need(n, what);
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }
  get done(): boolean {
    return this.offset >= this.bytes.length;
  }
}

/** The Spec ID event's digest sizes by algorithm id (the header every crypto-agile log opens with). */
function specIdBanks(r: Reader): Map<number, number> {
  const pcr = r.u32("first event");
  const type = r.u32("first event");
  r.take(20, "first event digest");
  const size = r.u32("first event size");
  const data = new Reader(r.take(size, "Spec ID event"));
  if (pcr !== 0 || type !== EV_NO_ACTION) throw new EventLogError("the first event is not a Spec ID event");
  if (data.take(16, "Spec ID signature").toString("latin1") !== SPEC_ID_SIGNATURE)
    throw new EventLogError("not a crypto-agile log (no Spec ID Event03 signature)");
  data.take(8, "Spec ID header"); // platformClass, version minor/major, errata, uintnSize
  const count = data.u32("Spec ID algorithm count");
  if (count < 1 || count > MAX_BANKS) throw new EventLogError(`Spec ID: ${count} algorithms`);
  const banks = new Map<number, number>();
  for (let i = 0; i < count; i++) banks.set(data.u16("Spec ID algorithm"), data.u16("Spec ID digest size"));
  if (banks.get(TPM_ALG_SHA256) !== 32) throw new EventLogError("the log has no sha256 bank");
  return banks;
}

/** Parses and replays a log; EventLogError says what is wrong with it. */
export function replayEventLog(bytes: Buffer): ReplayedLog {
  if (bytes.length > TPM_EVENT_LOG_MAX_BYTES)
    throw new EventLogError(`longer than ${TPM_EVENT_LOG_MAX_BYTES} bytes`);
  const r = new Reader(bytes);
  const banks = specIdBanks(r);
  const events: LoggedEvent[] = [];
  const pcrs = new Map<number, Buffer>();
  let startupLocality = 0;
  while (!r.done) {
    if (events.length >= MAX_EVENTS) throw new EventLogError(`more than ${MAX_EVENTS} events`);
    const pcr = r.u32("event PCR");
    const type = r.u32("event type");
    const count = r.u32("event digest count");
    if (pcr > 23) throw new EventLogError(`an event for PCR ${pcr}`);
    if (count < 1 || count > MAX_BANKS) throw new EventLogError(`an event with ${count} digests`);
    let sha256: Buffer | undefined;
    for (let i = 0; i < count; i++) {
      const alg = r.u16("digest algorithm");
      const size = banks.get(alg);
      if (size === undefined)
        throw new EventLogError(`a digest of algorithm 0x${alg.toString(16)} the Spec ID does not list`);
      const digest = r.take(size, "digest");
      if (alg === TPM_ALG_SHA256) sha256 = digest;
    }
    const data = r.take(r.u32("event size"), "event data");
    if (type === EV_NO_ACTION) {
      // Not extended. StartupLocality (PFP §10.4.5.3) sets PCR 0's starting value.
      if (
        pcr === 0 &&
        data.subarray(0, 16).toString("latin1") === STARTUP_LOCALITY_SIGNATURE &&
        data.length >= 17
      )
        startupLocality = data[16] as number;
      continue;
    }
    if (!sha256) throw new EventLogError("an event without a sha256 digest");
    let value = pcrs.get(pcr);
    if (value === undefined) {
      // PCRs 17-22 start as all ones (dynamic launch); the others as zero, PCR 0 with the locality.
      value = Buffer.alloc(32, pcr >= 17 && pcr <= 22 ? 0xff : 0);
      if (pcr === 0) value[31] = startupLocality;
    }
    pcrs.set(pcr, createHash("sha256").update(value).update(sha256).digest());
    events.push({ pcr, type, sha256: sha256.toString("hex") });
  }
  return { events, pcrs: new Map([...pcrs].map(([i, v]) => [i, v.toString("hex")])) };
}
