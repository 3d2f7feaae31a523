/**
 * What is taken off an official Node binary before the blob goes in, in plain code (no host
 * tool, so every machine gets the same bytes):
 * - ELF (Linux): the debug info and the static symbol table (.debug_*, .symtab, .strtab),
 *   which nothing at run time reads (the dynamic symbols stay): 18 MiB of 121 MiB;
 * - PE (Windows): the Authenticode signature, which the injection invalidates anyway (Node's
 *   SEA guide removes it with `signtool remove /s` first): an unsigned file rather than one
 *   whose signature fails.
 * Anything unexpected in the layout leaves the binary as it is.
 */

const SHF_ALLOC = 0x2;
const SHF_INFO_LINK = 0x40;
const SHT_NOBITS = 8;

interface Section {
  name: number;
  type: number;
  flags: bigint;
  offset: number;
  size: number;
  link: number;
  info: number;
  align: number;
  raw: Buffer;
}

function stripElf(bin: Buffer): Buffer {
  // ELF64 little endian only (both Linux targets).
  if (bin.readUInt32BE(0) !== 0x7f454c46 || bin[4] !== 2 || bin[5] !== 1) return bin;
  const shoff = Number(bin.readBigUInt64LE(0x28));
  const phoff = Number(bin.readBigUInt64LE(0x20));
  const phentsize = bin.readUInt16LE(0x36);
  const phnum = bin.readUInt16LE(0x38);
  const shentsize = bin.readUInt16LE(0x3a);
  const shnum = bin.readUInt16LE(0x3c);
  const shstrndx = bin.readUInt16LE(0x3e);
  if (shentsize !== 64 || shnum === 0 || shstrndx >= shnum) return bin;
  const sections: Section[] = [];
  for (let i = 0; i < shnum; i++) {
    const o = shoff + i * 64;
    sections.push({
      name: bin.readUInt32LE(o),
      type: bin.readUInt32LE(o + 4),
      flags: bin.readBigUInt64LE(o + 8),
      offset: Number(bin.readBigUInt64LE(o + 24)),
      size: Number(bin.readBigUInt64LE(o + 32)),
      link: bin.readUInt32LE(o + 40),
      info: bin.readUInt32LE(o + 44),
      align: Number(bin.readBigUInt64LE(o + 48)),
      raw: Buffer.from(bin.subarray(o, o + 64)),
    });
  }
  const strtab = sections[shstrndx] as Section;
  const nameOf = (s: Section) => {
    const start = strtab.offset + s.name;
    return bin.toString("latin1", start, bin.indexOf(0, start));
  };
  const dropped = new Set<number>();
  sections.forEach((s, i) => {
    const name = nameOf(s);
    const alloc = (s.flags & BigInt(SHF_ALLOC)) !== 0n;
    if (
      !alloc &&
      s.type !== SHT_NOBITS &&
      (name.startsWith(".debug_") || name === ".symtab" || name === ".strtab")
    ) {
      dropped.add(i);
    }
  });
  if (dropped.size === 0 || dropped.has(shstrndx)) return bin;
  const cut = Math.min(...[...dropped].map((i) => (sections[i] as Section).offset));
  // Everything loaded, and every kept section before the cut, must end before it.
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize;
    if (Number(bin.readBigUInt64LE(o + 8)) + Number(bin.readBigUInt64LE(o + 32)) > cut) return bin;
  }
  const index = new Map<number, number>();
  sections.forEach((_, i) => {
    if (!dropped.has(i)) index.set(i, index.size);
  });
  for (const [i] of index) {
    const s = sections[i] as Section;
    if (dropped.has(s.link) || ((s.flags & BigInt(SHF_INFO_LINK)) !== 0n && dropped.has(s.info))) return bin;
    if (s.type !== SHT_NOBITS && s.offset < cut && s.offset + s.size > cut) return bin;
  }

  const parts: Buffer[] = [bin.subarray(0, cut)];
  let length = cut;
  const pad = (align: number) => {
    const extra = (align - (length % align)) % align;
    if (extra > 0) {
      parts.push(Buffer.alloc(extra));
      length += extra;
    }
  };
  const headers: Buffer[] = [];
  for (const [i] of index) {
    const s = sections[i] as Section;
    const h = Buffer.from(s.raw);
    if (s.type !== SHT_NOBITS && s.size > 0 && s.offset >= cut) {
      pad(Math.max(1, s.align));
      h.writeBigUInt64LE(BigInt(length), 24);
      parts.push(bin.subarray(s.offset, s.offset + s.size));
      length += s.size;
    }
    h.writeUInt32LE(index.get(s.link) ?? 0, 40);
    if ((s.flags & BigInt(SHF_INFO_LINK)) !== 0n) h.writeUInt32LE(index.get(s.info) ?? 0, 44);
    headers.push(h);
  }
  pad(8);
  const out = Buffer.concat([...parts, ...headers]);
  out.writeBigUInt64LE(BigInt(length), 0x28);
  out.writeUInt16LE(headers.length, 0x3c);
  out.writeUInt16LE(index.get(shstrndx) as number, 0x3e);
  return out;
}

function unsignPe(bin: Buffer): Buffer {
  if (bin.readUInt16LE(0) !== 0x5a4d) return bin; // "MZ"
  const pe = bin.readUInt32LE(0x3c);
  if (bin.readUInt32BE(pe) !== 0x50450000) return bin; // "PE\0\0"
  const opt = pe + 24;
  if (bin.readUInt16LE(opt) !== 0x20b) return bin; // PE32+ only
  const security = opt + 112 + 4 * 8; // data directory 4: the certificate table (a file offset)
  const offset = bin.readUInt32LE(security);
  const size = bin.readUInt32LE(security + 4);
  if (size === 0 || offset + size !== bin.length) return bin;
  const out = Buffer.from(bin.subarray(0, offset));
  out.writeUInt32LE(0, security);
  out.writeUInt32LE(0, security + 4);
  return out;
}

export function prepareBase(bin: Buffer): Buffer {
  return unsignPe(stripElf(bin));
}
