/**
 * Reads a built executable the way Node's SEA start-up does, for the checks that need no
 * target machine: where the blob sits (one PE resource, or anywhere in an ELF file), what
 * its header says (flags, main script path), and whether the fuse is set.
 */
export const FUSE = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2";
const SEA_MAGIC = 0x0143da20;

export const SEA_FLAGS = {
  disableExperimentalSeaWarning: 1 << 0,
  useSnapshot: 1 << 1,
  useCodeCache: 1 << 2,
  includeAssets: 1 << 3,
} as const;

export interface BlobHeader {
  offset: number;
  flags: number;
  codePath: string;
  /** The blob up to the end of the main script. */
  bytes: Buffer;
}

/** The blob whose main script is `codePath`, found by its header. */
export function findBlob(exe: Buffer, codePath = "loader.cjs"): BlobHeader | undefined {
  const needle = Buffer.alloc(8 + codePath.length);
  needle.writeBigUInt64LE(BigInt(codePath.length), 0);
  needle.write(codePath, 8, "latin1");
  for (let at = exe.indexOf(needle); at !== -1; at = exe.indexOf(needle, at + 1)) {
    // magic u32, flags u32, then (Node 24) one byte (how execArgv extends), then the path.
    const start = at - 9;
    if (start < 0 || exe.readUInt32LE(start) !== SEA_MAGIC) continue;
    const flags = exe.readUInt32LE(start + 4);
    const codeAt = at + needle.length;
    const codeLength = Number(exe.readBigUInt64LE(codeAt));
    return { offset: start, flags, codePath, bytes: exe.subarray(start, codeAt + 8 + codeLength) };
  }
  return undefined;
}

export function fuseState(exe: Buffer): { set: number; unset: number } {
  const count = (s: string) => {
    let n = 0;
    for (let at = exe.indexOf(s); at !== -1; at = exe.indexOf(s, at + 1)) n++;
    return n;
  };
  return { set: count(`${FUSE}:1`), unset: count(`${FUSE}:0`) };
}

interface PeSection {
  va: number;
  rawSize: number;
  rawPtr: number;
}

function peLayout(exe: Buffer) {
  const pe = exe.readUInt32LE(0x3c);
  if (exe.readUInt32BE(pe) !== 0x50450000) throw new Error("not a PE file");
  const nsections = exe.readUInt16LE(pe + 6);
  const optSize = exe.readUInt16LE(pe + 20);
  const opt = pe + 24;
  if (exe.readUInt16LE(opt) !== 0x20b) throw new Error("not PE32+");
  const dir = (i: number) => ({
    rva: exe.readUInt32LE(opt + 112 + i * 8),
    size: exe.readUInt32LE(opt + 116 + i * 8),
  });
  const sections: PeSection[] = [];
  for (let i = 0; i < nsections; i++) {
    const s = opt + optSize + i * 40;
    sections.push({
      va: exe.readUInt32LE(s + 12),
      rawSize: exe.readUInt32LE(s + 16),
      rawPtr: exe.readUInt32LE(s + 20),
    });
  }
  const fileOffset = (rva: number) => {
    const s = sections.find((x) => rva >= x.va && rva < x.va + x.rawSize);
    if (s === undefined) throw new Error(`RVA ${rva} is in no section`);
    return rva - s.va + s.rawPtr;
  };
  return { machine: exe.readUInt16LE(pe + 4), dir, fileOffset };
}

/** The bytes of the RT_RCDATA resource NAME (what FindResource(NULL, NAME, RT_RCDATA) finds). */
export function peResource(exe: Buffer, name: string): Buffer | undefined {
  const { dir, fileOffset } = peLayout(exe);
  const res = dir(2);
  if (res.size === 0) return undefined;
  const base = fileOffset(res.rva);
  const entries = (at: number) => {
    const n = exe.readUInt16LE(at + 12) + exe.readUInt16LE(at + 14);
    return Array.from({ length: n }, (_, i) => ({
      id: exe.readUInt32LE(at + 16 + i * 8),
      target: exe.readUInt32LE(at + 20 + i * 8),
    }));
  };
  const RT_RCDATA = 10;
  const type = entries(base).find((e) => e.id === RT_RCDATA);
  if (type === undefined) return undefined;
  const named = entries(base + (type.target & 0x7fffffff)).find((e) => {
    if ((e.id & 0x80000000) === 0) return false;
    const at = base + (e.id & 0x7fffffff);
    return exe.toString("utf16le", at + 2, at + 2 + exe.readUInt16LE(at) * 2) === name;
  });
  if (named === undefined) return undefined;
  const lang = entries(base + (named.target & 0x7fffffff))[0];
  if (lang === undefined) return undefined;
  const data = base + (lang.target & 0x7fffffff);
  const at = fileOffset(exe.readUInt32LE(data));
  return exe.subarray(at, at + exe.readUInt32LE(data + 4));
}

/** The certificate table (Authenticode) directory entry: size 0 when unsigned. */
export function peCertificateSize(exe: Buffer): number {
  return peLayout(exe).dir(4).size;
}

export function peMachine(exe: Buffer): number {
  return peLayout(exe).machine;
}

/** e_machine of an ELF file (62 x86-64, 183 AArch64). */
export function elfMachine(exe: Buffer): number {
  if (exe.readUInt32BE(0) !== 0x7f454c46) throw new Error("not an ELF file");
  return exe.readUInt16LE(18);
}
