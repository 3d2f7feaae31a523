/**
 * The sops key service protocol, both directions, against the real sops: the real
 * `sops --keyservice` wraps and unwraps data keys with keys only `bootseal keyservice`
 * holds (TCP and a Unix socket, age and PGP), and `bootseal --keyservice` uses a running
 * `sops keyservice` that alone holds the age identity. Then the failures: a service that is
 * down, and a URI that is not one.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { stopChild } from "../helpers/child.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { BOOTSEAL_MAIN, createHarness, type Harness, ok } from "./harness.ts";

const PLAIN =
  "token: abcdef.0123456789abcdef\nnested:\n    port: 6443\n    list:\n        - a\n        - b\n";
const TIMEOUT = { timeout: 180_000 };
/** Bounded waits: 600 polls of 100 ms. */
const POLLS = 600;

let h: Harness;
/** An environment with no age identity and an empty GnuPG home: keys only through a service. */
let keyless: NodeJS.ProcessEnv;
before(() => {
  h = createHarness();
  const emptyGnupg = join(h.dir, "gnupg-empty");
  mkdirSync(emptyGnupg, { mode: 0o700 });
  keyless = { SOPS_AGE_KEY_FILE: join(h.dir, "no-such-key.txt"), GNUPGHOME: emptyGnupg };
  writeFileSync(join(h.dir, "plain.yaml"), PLAIN);
});
after(() => h?.cleanup());

interface Background {
  readonly child: ChildProcess;
  output(): string;
  /** SIGTERM, then the exit code once it has exited. */
  stop(): Promise<number | null>;
}

function background(cmd: string, args: string[], env: NodeJS.ProcessEnv, stdin = false): Background {
  const child = spawn(cmd, args, { env, cwd: h.dir, stdio: [stdin ? "pipe" : "ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout?.on("data", (c) => {
    output += c;
  });
  child.stderr?.on("data", (c) => {
    output += c;
  });
  return {
    child,
    output: () => output,
    stop: () => stopChild(child, { output: () => output }),
  };
}

const pause = () => new Promise((r) => setTimeout(r, 100));

/** `bootseal keyservice ARGS`, waited for until it prints the address it listens on. */
async function bootsealKeyservice(
  args: string[],
  stdin = false,
  env: NodeJS.ProcessEnv = {},
): Promise<Background & { url: string }> {
  const svc = background(
    process.execPath,
    [BOOTSEAL_MAIN, "keyservice", ...args],
    { ...h.env, ...env },
    stdin,
  );
  for (let i = 0; i < POLLS; i++) {
    const url = /listening on (\S+)/.exec(svc.output())?.[1];
    if (url) return { ...svc, url };
    if (svc.child.exitCode !== null) break;
    await pause();
  }
  await svc.stop();
  throw new Error(`bootseal keyservice did not come up: ${svc.output()}`);
}

/** True once something accepts a connection there. */
function accepts(target: { path: string } | { port: number; host: string }): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(target);
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/** The real `sops keyservice` (it logs nothing at its default level: wait for a connection). */
async function sopsKeyservice(
  listen: { network: "unix"; path: string } | { network: "tcp"; port: number },
): Promise<Background & { url: string }> {
  const address = listen.network === "unix" ? listen.path : `127.0.0.1:${listen.port}`;
  // Only the service holds the age identity.
  const svc = background(
    peer("SOPS_BIN"),
    ["keyservice", "--network", listen.network, "--address", address],
    {
      ...h.env,
      SOPS_AGE_KEY_FILE: h.ageKeyFile,
    },
  );
  const target = listen.network === "unix" ? { path: listen.path } : { port: listen.port, host: "127.0.0.1" };
  for (let i = 0; i < POLLS; i++) {
    if (await accepts(target)) return { ...svc, url: `${listen.network}://${address}` };
    if (svc.child.exitCode !== null) break;
    await pause();
  }
  await svc.stop();
  throw new Error(`sops keyservice did not come up: ${svc.output()}`);
}

const remoteOnly = (url: string) => ["--keyservice", url, "--enable-local-keyservice=false"];

test(
  "real sops encrypts and decrypts over TCP with an age key only bootseal keyservice holds",
  TIMEOUT,
  async () => {
    const svc = await bootsealKeyservice(["--network", "tcp", "--address", "127.0.0.1:0", "--verbose"]);
    try {
      assert.match(svc.url, /^tcp:\/\/127\.0\.0\.1:\d+$/);
      const enc = ok(
        await h.sops(["encrypt", ...remoteOnly(svc.url), "--age", h.ageRecipient, "plain.yaml"], {
          env: keyless,
        }),
        "sops encrypt through bootseal keyservice",
      );
      writeFileSync(join(h.dir, "tcp.enc.yaml"), enc);
      assert.ok(enc.toString().includes(h.ageRecipient));
      const out = ok(
        await h.sops(["decrypt", ...remoteOnly(svc.url), "tcp.enc.yaml"], { env: keyless }),
        "sops decrypt through bootseal keyservice",
      );
      assert.equal(out.toString(), PLAIN);
      // sops tries its local key service first (no identity here), then the remote one.
      const withLocal = ok(
        await h.sops(["decrypt", "--keyservice", svc.url, "tcp.enc.yaml"], { env: keyless }),
        "sops decrypt, local key service first",
      );
      assert.equal(withLocal.toString(), PLAIN);
      // The wrap is an ordinary age stanza: sops opens it with the identity and no service.
      assert.equal(ok(await h.sops(["decrypt", "tcp.enc.yaml"]), "sops decrypt locally").toString(), PLAIN);
      // Without the key service, sops has nothing to open it with.
      const without = await h.sops(["decrypt", "tcp.enc.yaml"], { env: keyless });
      assert.notEqual(without.status, 0);
      assert.match(svc.output(), /decrypt request for age1\w+: answered/);
    } finally {
      assert.equal(await svc.stop(), 0, "SIGTERM ends bootseal keyservice with 0");
    }
  },
);

test(
  "real sops over a Unix socket with age and PGP keys only bootseal keyservice holds",
  TIMEOUT,
  async () => {
    const socket = join(h.dir, "bootseal-ks.sock");
    const svc = await bootsealKeyservice(["--network", "unix", "--address", socket]);
    try {
      assert.equal(svc.url, `unix://${socket}`);
      const args = ["--age", h.ageRecipient, "--pgp", h.pgpFingerprint];
      const enc = ok(
        await h.sops(["encrypt", ...remoteOnly(svc.url), ...args, "plain.yaml"], { env: keyless }),
        "sops encrypt over the socket",
      );
      const text = enc.toString();
      assert.ok(text.includes(h.pgpFingerprint) && text.includes(h.ageRecipient));
      writeFileSync(join(h.dir, "unix.enc.yaml"), enc);
      for (const order of ["age", "pgp"]) {
        const out = ok(
          await h.sops(["decrypt", ...remoteOnly(svc.url), "--decryption-order", order, "unix.enc.yaml"], {
            env: keyless,
          }),
          `sops decrypt over the socket, ${order} first`,
        );
        assert.equal(out.toString(), PLAIN);
      }
      // The PGP wrap alone opens with gpg's key and no service (age identity hidden).
      const pgpOnly = await h.sops(["decrypt", "unix.enc.yaml"], {
        env: { SOPS_AGE_KEY_FILE: keyless.SOPS_AGE_KEY_FILE },
      });
      assert.equal(ok(pgpOnly, "sops decrypt with gpg").toString(), PLAIN);
    } finally {
      assert.equal(await svc.stop(), 0);
    }
    assert.equal(existsSync(socket), false, "the socket is removed at shutdown");
  },
);

test(
  "real sops with a Vault transit key whose token only bootseal keyservice has (OpenBao)",
  TIMEOUT,
  async () => {
    const addr = peer("VAULT_ADDR");
    const token = peer("VAULT_TOKEN");
    const name = uniqueName("keyservice-interop");
    const res = await fetch(`${addr}/v1/transit/keys/${name}`, {
      method: "POST",
      headers: { "X-Vault-Token": token },
    });
    assert.ok(res.ok, `create transit key: HTTP ${res.status}`);
    const uri = `${addr}/v1/transit/keys/${name}`;
    const svc = await bootsealKeyservice(["--address", "127.0.0.1:0"], false, { VAULT_TOKEN: token });
    try {
      const enc = ok(
        await h.sops(["encrypt", ...remoteOnly(svc.url), "--hc-vault-transit", uri, "plain.yaml"], {
          env: keyless,
        }),
        "sops encrypt through bootseal keyservice",
      );
      assert.match(enc.toString(), /enc: vault:v1:/);
      assert.match(enc.toString(), /created_at: /);
      writeFileSync(join(h.dir, "vault.enc.yaml"), enc);
      const out = ok(
        await h.sops(["decrypt", ...remoteOnly(svc.url), "vault.enc.yaml"], { env: keyless }),
        "sops decrypt through bootseal keyservice",
      );
      assert.equal(out.toString(), PLAIN);
      // The wrap is Vault's own: sops with the token and no service opens it too.
      const direct = await h.sops(["decrypt", "vault.enc.yaml"], { env: { ...keyless, VAULT_TOKEN: token } });
      assert.equal(ok(direct, "sops decrypt with the token").toString(), PLAIN);
    } finally {
      assert.equal(await svc.stop(), 0);
    }
  },
);

test("bootseal keyservice --prompt: a request answered n is refused, y is served", TIMEOUT, async () => {
  const svc = await bootsealKeyservice(["--address", "127.0.0.1:0", "--prompt"], true);
  try {
    const encrypt = () =>
      h.sops(["encrypt", ...remoteOnly(svc.url), "--age", h.ageRecipient, "plain.yaml"], { env: keyless });
    svc.child.stdin?.write("n\n");
    const refused = await encrypt();
    assert.notEqual(refused.status, 0);
    assert.ok(refused.stderr.includes("Request rejected by user"), refused.stderr);
    svc.child.stdin?.write("maybe\ny\n");
    const served = await encrypt();
    assert.ok(ok(served, "sops encrypt, answered y").toString().includes(h.ageRecipient));
    assert.match(
      svc.output(),
      /Received encrypt request using age key age1\w+\. Respond to request\? \(y\/n\)/,
    );
  } finally {
    svc.child.stdin?.end();
    assert.equal(await svc.stop(), 0);
  }
});

test(
  "bootseal --keyservice uses a running sops keyservice that alone holds the age identity",
  TIMEOUT,
  async () => {
    const socket = join(h.dir, "sops-ks.sock");
    const svc = await sopsKeyservice({ network: "unix", path: socket });
    try {
      const sopsEnc = ok(await h.sops(["encrypt", "--age", h.ageRecipient, "plain.yaml"]), "sops encrypt");
      writeFileSync(join(h.dir, "by-sops.enc.yaml"), sopsEnc);
      const out = ok(
        await h.bootseal(["decrypt", ...remoteOnly(svc.url), "by-sops.enc.yaml"], { env: keyless }),
        "bootseal decrypt through sops keyservice",
      );
      assert.equal(out.toString(), PLAIN);
      // Without the service bootseal cannot open it: the key really came from sops keyservice.
      const alone = await h.bootseal(["decrypt", "by-sops.enc.yaml"], { env: keyless });
      assert.equal(alone.status, EXIT_CODES.NO_KEY_AVAILABLE);

      const enc = ok(
        await h.bootseal(["encrypt", ...remoteOnly(svc.url), "--age", h.ageRecipient, "plain.yaml"], {
          env: keyless,
        }),
        "bootseal encrypt through sops keyservice",
      );
      writeFileSync(join(h.dir, "by-bootseal.enc.yaml"), enc);
      assert.equal(ok(await h.sops(["decrypt", "by-bootseal.enc.yaml"]), "sops decrypt").toString(), PLAIN);

      // rotate: a new data key, unwrapped and wrapped through the service.
      ok(
        await h.bootseal(["rotate", "-i", ...remoteOnly(svc.url), "by-bootseal.enc.yaml"], { env: keyless }),
        "bootseal rotate through sops keyservice",
      );
      assert.equal(
        ok(await h.sops(["decrypt", "by-bootseal.enc.yaml"]), "sops decrypt rotated").toString(),
        PLAIN,
      );
    } finally {
      await svc.stop();
    }
  },
);

test("bootseal --keyservice tcp:// with a sops keyservice on TCP", TIMEOUT, async () => {
  const svc = await sopsKeyservice({ network: "tcp", port: await freePort() });
  try {
    const enc = ok(await h.sops(["encrypt", "--age", h.ageRecipient, "plain.yaml"]), "sops encrypt");
    writeFileSync(join(h.dir, "tcp-sops.enc.yaml"), enc);
    const out = ok(
      await h.bootseal(["decrypt", ...remoteOnly(svc.url), "tcp-sops.enc.yaml"], { env: keyless }),
      "bootseal decrypt over TCP",
    );
    assert.equal(out.toString(), PLAIN);
    // SOPS_KEYSERVICE and SOPS_ENABLE_LOCAL_KEYSERVICE do the same as the flags.
    const byEnv = await h.bootseal(["decrypt", "tcp-sops.enc.yaml"], {
      env: { ...keyless, SOPS_KEYSERVICE: svc.url, SOPS_ENABLE_LOCAL_KEYSERVICE: "false" },
    });
    assert.equal(ok(byEnv, "bootseal decrypt, services from the environment").toString(), PLAIN);
  } finally {
    await svc.stop();
  }
});

test("a key service that is down: one line naming it, and the key exit codes", TIMEOUT, async () => {
  const enc = ok(await h.sops(["encrypt", "--age", h.ageRecipient, "plain.yaml"]), "sops encrypt");
  writeFileSync(join(h.dir, "down.enc.yaml"), enc);
  const downs = [`tcp://127.0.0.1:${await freePort()}`, `unix://${join(h.dir, "nobody-listens.sock")}`];
  for (const url of downs) {
    const dec = await h.bootseal(["decrypt", ...remoteOnly(url), "down.enc.yaml"], { env: keyless });
    assert.equal(dec.status, EXIT_CODES.NO_KEY_AVAILABLE, dec.stderr);
    assert.equal(dec.stderr.trim().split("\n").length, 1, dec.stderr);
    assert.ok(dec.stderr.includes(`key service ${url}: UNAVAILABLE`), dec.stderr);
    assert.equal(dec.stdout.length, 0);

    const encrypt = await h.bootseal(["encrypt", ...remoteOnly(url), "--age", h.ageRecipient, "plain.yaml"], {
      env: keyless,
    });
    assert.equal(encrypt.status, EXIT_CODES.KEY_UNAVAILABLE, encrypt.stderr);
    assert.equal(encrypt.stderr.trim().split("\n").length, 1, encrypt.stderr);
    assert.ok(encrypt.stderr.includes(url), encrypt.stderr);
  }
  // The local key service comes first: with the identity here, a dead remote is never needed.
  const local = await h.bootseal(["decrypt", "--keyservice", downs[0] as string, "down.enc.yaml"]);
  assert.equal(ok(local, "bootseal decrypt, local first").toString(), PLAIN);
});

test("a --keyservice that is not protocol://address is a usage error", TIMEOUT, async () => {
  const enc = ok(await h.sops(["encrypt", "--age", h.ageRecipient, "plain.yaml"]), "sops encrypt");
  writeFileSync(join(h.dir, "usage.enc.yaml"), enc);
  for (const uri of ["127.0.0.1:5000", "udp://127.0.0.1:5000", "tcp://127.0.0.1", "unix://relative.sock"]) {
    const r = await h.bootseal(["decrypt", "--keyservice", uri, "usage.enc.yaml"]);
    assert.equal(r.status, EXIT_CODES.USAGE, `${uri}: ${r.stderr}`);
    assert.ok(r.stderr.includes("--keyservice"), r.stderr);
  }
  const bad = await h.bootseal(["keyservice", "--network", "udp", "--address", "127.0.0.1:0"]);
  assert.equal(bad.status, EXIT_CODES.USAGE, bad.stderr);
});
