/**
 * File-descriptor calls as promises, over Node's callback API. The file object store and the
 * atomic writer make several small calls per object; through node:fs/promises each one also
 * makes and tracks a FileHandle, which measured twice the CPU of the same calls through the
 * callback API (open+fstat+read+close of a 3 KiB file: 55 µs against 30 µs per read,
 * docs/benchmarks.md). The descriptors are closed by the callers, in `finally`.
 */
import fs, { type Stats } from "node:fs";

function call<T>(start: (done: (err: NodeJS.ErrnoException | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => start((err, value) => (err ? reject(err) : resolve(value))));
}

export const openFd = (path: string, flags: string | number, mode?: number): Promise<number> =>
  call((done) => fs.open(path, flags, mode, done));

export const closeFd = (fd: number): Promise<void> =>
  call<void>((done) => fs.close(fd, (err) => done(err, undefined)));

export const fstatFd = (fd: number): Promise<Stats> => call((done) => fs.fstat(fd, done));

export const fsyncFd = (fd: number): Promise<void> =>
  call<void>((done) => fs.fsync(fd, (err) => done(err, undefined)));

export const ftruncateFd = (fd: number, length: number): Promise<void> =>
  call<void>((done) => fs.ftruncate(fd, length, (err) => done(err, undefined)));

export const fchmodFd = (fd: number, mode: number): Promise<void> =>
  call<void>((done) => fs.fchmod(fd, mode, (err) => done(err, undefined)));

export const fchownFd = (fd: number, uid: number, gid: number): Promise<void> =>
  call<void>((done) => fs.fchown(fd, uid, gid, (err) => done(err, undefined)));

/** Reads at most `length` bytes at the current position; the count read (0 at the end). */
export const readFd = (fd: number, buffer: Uint8Array, offset: number, length: number): Promise<number> =>
  call((done) => fs.read(fd, buffer, offset, length, null, done));

/** Writes all of `data` (a short write continues where it stopped). */
export async function writeAllFd(fd: number, data: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < data.byteLength) {
    offset += await call<number>((done) => fs.write(fd, data, offset, data.byteLength - offset, null, done));
  }
}
