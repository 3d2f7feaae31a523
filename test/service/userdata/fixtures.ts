/** Shared params for the user-data stub tests: realistic, and hostile-looking but valid. */
import { generateKeyPairSync, type KeyObject } from "node:crypto";
import type { UserdataParams } from "../../../src/service/userdata/index.ts";

export function ed25519(): { publicKey: KeyObject; privateKey: KeyObject; publicKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync("ed25519");
  return { publicKey, privateKey, publicKeyPem: String(publicKey.export({ type: "spki", format: "pem" })) };
}

export const SHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
export const SHA512 =
  "ee26b0dd4af7e749aa1a8ee3c10ae9923f618980772e473f8819a5d4940e0db27ac185f8a0e1d5f84f88bc887fd67b143732c304cc5fa9ad8e6f57f50028a8ff";

/** The token a fixture's stub carries (every fixture here authenticates with one). */
export function tokenOf(p: { auth: UserdataParams["auth"] }): string {
  if (p.auth.method !== "token") throw new Error("this fixture carries no token");
  return p.auth.token;
}

/** What a controller would pass for a worker node. */
export function realisticParams(
  publicKeyPem: string,
  artifactBase = "https://dl.example.com",
): UserdataParams {
  return {
    serviceUrl: "https://bootseal.example.com:7480",
    machine: { namespace: "cluster-a", name: "worker-0" },
    auth: { method: "token", token: "Zt4qK1v9bX_3mN-0pLwR8sYcJ2hFgE5aUoT7iD6kQxM" },
    artifact: {
      url: `${artifactBase}/bootseal/0.1.0/bootseal-linux-x64`,
      sha256: SHA,
      sha512: SHA512,
      signatureUrl: `${artifactBase}/bootseal/0.1.0/bootseal-linux-x64.sig`,
      publicKeyPem,
    },
  };
}

/**
 * Valid values that look like trouble in every target language: YAML 1.1 specials
 * (`yes`, `null`, 0x.., 0b..), shell and PowerShell expansion ($(...), ${...}, &, ;),
 * a token that starts with '-' and one that YAML 1.1 reads as a number.
 */
export function hostileParams(
  publicKeyPem: string,
  artifactBase = "https://dl.example.com",
): UserdataParams[] {
  // Run by a shell that expanded it, this would create .pwned in the working directory.
  const q = "?X-Amz-Credential=AKIA%2F20261130&X-Amz-Signature=$(touch$IFS.pwned)&x=;touch$IFS.pwned;";
  return [
    {
      serviceUrl: "http://[::1]:7480/a$b/(c)*;d=e,f!@",
      machine: { namespace: "yes", name: "null" },
      auth: { method: "token", token: "0x0123456789abcdef" },
      artifact: {
        url: `${artifactBase}/bootseal${q}`,
        sha256: SHA.toUpperCase(),
        sha512: SHA512.toUpperCase(),
        signatureUrl: `${artifactBase}/sig?$HOME=1&a=$(id)`,
        publicKeyPem: publicKeyPem.replace(/\n/g, "\r\n"),
      },
    },
    {
      serviceUrl: "https://10.0.0.1/",
      machine: { namespace: "0", name: "on" },
      auth: { method: "token", token: "--help.-_..--.-rf" },
      artifact: {
        url: `${artifactBase}/x?a=1&b=2`,
        sha256: SHA,
        sha512: SHA512,
        signatureUrl: `${artifactBase}/x.sig?$(touch$IFS.pwned)`,
        publicKeyPem,
      },
    },
    {
      serviceUrl: "https://b.example/~user/.inf",
      machine: { namespace: "no", name: "true" },
      auth: { method: "token", token: "0b10101010101010101" },
      artifact: {
        url: `${artifactBase}/1e1000`,
        sha256: SHA,
        sha512: SHA512,
        signatureUrl: `${artifactBase}/.nan`,
        publicKeyPem,
      },
    },
  ];
}
