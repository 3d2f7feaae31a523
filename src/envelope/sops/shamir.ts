/**
 * Shamir secret sharing over GF(2^8), share layout as sops writes it (docs/sops-format.md section 9;
 * sops `shamir/shamir.go`, a vendored copy of HashiCorp Vault's implementation).
 *
 * Why not the npm `shamir-secret-sharing` package: it uses the same field and the same
 * layout (y-bytes, then one trailing x byte; the tests cross-check both directions), but
 * it picks random x values and offers no way to choose them, while sops evaluates the
 * share of group i at x = i + 1. This is field arithmetic, not a cipher primitive, so it is
 * written here; randomness comes from node:crypto.
 *
 * Multiplication is bitwise and branch-free (no log/exp tables), so the time taken does not
 * depend on secret bytes through table lookups.
 */
import { randomBytes } from "node:crypto";
import { BootsealError } from "../../errors.ts";

/** Most groups sops can split into: x is one byte and x = 0 would be the secret itself. */
export const MAX_SHARES = 255;

/** Product in GF(2^8) reduced by the AES polynomial x^8 + x^4 + x^3 + x + 1 (0x11B). */
export function gfMul(a: number, b: number): number {
  let product = 0;
  let x = a & 0xff;
  let y = b & 0xff;
  for (let i = 0; i < 8; i++) {
    product ^= -(y & 1) & x;
    // Multiply x by the polynomial "x"; when bit 7 falls off, reduce with 0x1B.
    x = ((x << 1) ^ (-(x >> 7) & 0x1b)) & 0xff;
    y >>= 1;
  }
  return product & 0xff;
}

/** Inverse in GF(2^8): a^254 (Fermat), constant time. The inverse of 0 comes out as 0. */
export function gfInv(a: number): number {
  // 254 = 0b11111110: square-and-multiply over the fixed exponent.
  let result = 1;
  let base = a & 0xff;
  for (let bit = 0; bit < 8; bit++) {
    if (bit > 0) result = gfMul(result, base);
    base = gfMul(base, base);
  }
  return result;
}

/** Horner evaluation of coefficients[0] + coefficients[1]·x + … at x. */
function evaluate(coefficients: Uint8Array, x: number): number {
  let y = 0;
  for (let i = coefficients.length - 1; i >= 0; i--) {
    y = gfMul(y, x) ^ (coefficients[i] ?? 0);
  }
  return y;
}

/**
 * Splits `secret` into `count` shares, any `threshold` of which recover it. Share i is the
 * evaluation at x = i + 1 of one random polynomial per secret byte (constant term = that
 * byte), encoded as the y-bytes followed by one byte holding x. The caller owns the shares
 * and should zero them after use.
 */
export function split(secret: Uint8Array, count: number, threshold: number): Uint8Array[] {
  if (secret.length === 0) throw new BootsealError("BAD_INPUT", "shamir: cannot split an empty secret");
  if (!Number.isInteger(count) || !Number.isInteger(threshold)) {
    throw new BootsealError("USAGE", "shamir: share count and threshold must be integers");
  }
  if (count < 2 || count > MAX_SHARES) {
    throw new BootsealError("USAGE", `shamir: share count must be 2..${MAX_SHARES}, got ${count}`);
  }
  if (threshold < 2 || threshold > count) {
    throw new BootsealError("USAGE", `shamir: threshold must be 2..${count}, got ${threshold}`);
  }
  const shares = Array.from({ length: count }, (_, i) => {
    const share = new Uint8Array(secret.length + 1);
    share[secret.length] = i + 1;
    return share;
  });
  const coefficients = new Uint8Array(threshold);
  try {
    for (let byte = 0; byte < secret.length; byte++) {
      coefficients[0] = secret[byte] ?? 0;
      const random = randomBytes(threshold - 1);
      coefficients.set(random, 1);
      random.fill(0);
      for (let i = 0; i < count; i++) {
        (shares[i] as Uint8Array)[byte] = evaluate(coefficients, i + 1);
      }
    }
  } finally {
    coefficients.fill(0);
  }
  return shares;
}

/**
 * Recovers the secret from two or more shares by Lagrange interpolation at x = 0, reading
 * each share's x from its last byte. Combining fewer shares than the threshold yields a
 * wrong secret, not an error: the caller checks the result (length, then the MAC).
 */
export function combine(shares: readonly Uint8Array[]): Uint8Array {
  if (shares.length < 2) throw new BootsealError("BAD_INPUT", "shamir: at least two shares are needed");
  if (shares.length > MAX_SHARES) throw new BootsealError("BAD_INPUT", "shamir: too many shares");
  const length = shares[0]?.length ?? 0;
  if (length < 2) throw new BootsealError("BAD_INPUT", "shamir: share too short");
  const xs = new Uint8Array(shares.length);
  const seen = new Set<number>();
  shares.forEach((share, i) => {
    if (share.length !== length) throw new BootsealError("BAD_INPUT", "shamir: shares differ in length");
    const x = share[length - 1] ?? 0;
    // sops writes x = 1..n and Vault 1..255; x = 0 is never a valid share.
    if (x === 0) throw new BootsealError("BAD_INPUT", "shamir: share has x = 0");
    if (seen.has(x)) throw new BootsealError("BAD_INPUT", "shamir: duplicate share");
    seen.add(x);
    xs[i] = x;
  });

  // Lagrange basis at 0: l_i = Π_{j≠i} x_j / (x_j - x_i); subtraction is XOR here.
  const basis = new Uint8Array(shares.length);
  for (let i = 0; i < shares.length; i++) {
    let num = 1;
    let den = 1;
    for (let j = 0; j < shares.length; j++) {
      if (i === j) continue;
      num = gfMul(num, xs[j] ?? 0);
      den = gfMul(den, (xs[j] ?? 0) ^ (xs[i] ?? 0));
    }
    basis[i] = gfMul(num, gfInv(den));
  }

  const secret = new Uint8Array(length - 1);
  for (let byte = 0; byte < secret.length; byte++) {
    let acc = 0;
    for (let i = 0; i < shares.length; i++) {
      acc ^= gfMul((shares[i] as Uint8Array)[byte] ?? 0, basis[i] ?? 0);
    }
    secret[byte] = acc;
  }
  basis.fill(0);
  return secret;
}
