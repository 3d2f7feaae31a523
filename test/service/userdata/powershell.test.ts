/**
 * The PowerShell stub for cloudbase-init. No PowerShell runs here (no `pwsh` in Debian's
 * archive), so this checks structure and quoting: every value is a single-quoted literal
 * that reads back as the value, the hash is compared before anything downloaded runs, the
 * signature is checked before the executable is installed, the token is written under a
 * SYSTEM/Administrators-only ACL before it holds the token.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { psSingleQuoted, windowsArg } from "../../../src/service/userdata/escape.ts";
import { checkParams, renderUserdata } from "../../../src/service/userdata/index.ts";
import { ed25519, hostileParams, realisticParams, tokenOf } from "./fixtures.ts";

const { publicKeyPem } = ed25519();

/**
 * Reads the top-level `$Name = '...'` assignments of a script the way PowerShell reads a
 * single-quoted string: it ends at a lone quote (ASCII or U+2018..U+201B), a doubled one is
 * one quote, nothing else is special.
 */
function singleQuotedAssignments(script: string): Map<string, string> {
  const out = new Map<string, string>();
  const quotes = "'\u2018\u2019\u201a\u201b";
  const re = /^\$([A-Za-z0-9]+) = (?=')/gm;
  for (let m = re.exec(script); m; m = re.exec(script)) {
    let i = re.lastIndex + 1;
    let value = "";
    for (;;) {
      const c = script[i];
      assert.ok(c !== undefined, `unterminated string for $${m[1]}`);
      if (quotes.includes(c)) {
        if (quotes.includes(script[i + 1] ?? "")) {
          value += c;
          i += 2;
          continue;
        }
        break;
      }
      value += c;
      i++;
    }
    // Only plain `$Name = '...'` lines (an expression such as '...' -f $x is not a value).
    if (script[i + 1] === "\n") out.set(m[1]!, value);
    re.lastIndex = i + 1;
  }
  return out;
}

describe("PowerShell stub", () => {
  const all = [realisticParams(publicKeyPem), ...hostileParams(publicKeyPem)];

  test("content type and #ps1_sysnative first line", () => {
    const r = renderUserdata("powershell", realisticParams(publicKeyPem));
    assert.equal(r.contentType, "text/x-powershell; charset=utf-8");
    assert.ok(r.body.startsWith("#ps1_sysnative\n"));
    assert.match(r.body, /^\$ErrorActionPreference = 'Stop'$/m);
  });

  all.forEach((params, i) => {
    test(`params #${i}: every value is a single-quoted literal that reads back exactly`, () => {
      const { body } = renderUserdata("powershell", params);
      const p = checkParams(params);
      const vars = singleQuotedAssignments(body);
      assert.equal(vars.get("BootsealMachine"), p.machine);
      assert.equal(vars.get("ConfigUrl"), p.configUrl);
      assert.equal(vars.get("ArtifactUrl"), p.artifactUrl);
      assert.equal(vars.get("ArtifactSha256"), p.artifactSha256);
      assert.equal(vars.get("SignatureUrl"), p.signatureUrl);
      assert.equal(vars.get("PublicKeyPem"), p.publicKeyPem);
      assert.equal(vars.get("BootstrapToken"), tokenOf(p));
      // Values appear nowhere else: no double-quoted string or here-string holds one.
      assert.equal(body.split(tokenOf(p)).length - 1, 1);
      assert.equal(body.split(`'${p.artifactUrl}'`).length - 1, 1);
      assert.ok(!body.includes('@"'), "no expandable here-string");
    });
  });

  test("psSingleQuoted round-trips hostile strings through the single-quote reading", () => {
    for (const v of [
      "it's",
      "‘quoted’ ‚low‛",
      "''",
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${env:PATH} is the input under test
      '$(Stop-Computer) `n ${env:PATH} "x" @\'',
      "a\nb\r\n",
      "",
    ]) {
      assert.equal(singleQuotedAssignments(`$X = ${psSingleQuoted(v)}\n`).get("X"), v);
    }
  });

  test("order: ACL before the token, hash before any run, signature before install, install before the task", () => {
    const { body } = renderUserdata("powershell", realisticParams(publicKeyPem));
    const at = (s: string): number => {
      const i = body.indexOf(s);
      assert.ok(i >= 0, `missing: ${s}`);
      return i;
    };
    // Token file: created empty, private ACL set, only then written.
    assert.ok(at("New-Item -ItemType File -Path $TokenFile") < at("Set-Acl -LiteralPath $TokenFile"));
    assert.ok(at("Set-Acl -LiteralPath $TokenFile") < at("WriteAllText($TokenFile, $BootstrapToken"));
    assert.ok(at("Set-Acl -LiteralPath $DataDir") < at("WriteAllText($TokenFile"));
    assert.match(body, /'S-1-5-18', 'S-1-5-32-544'/);
    assert.match(body, /SetAccessRuleProtection\(\$true, \$false\)/);
    // Download, hash, then the first run of anything downloaded, then install.
    assert.ok(
      at("Get-WithRetry $ArtifactUrl $Download") < at("if ((Get-Sha256 $Download) -ne $ArtifactSha256)"),
    );
    assert.ok(at("if ((Get-Sha256 $Download) -ne $ArtifactSha256)") < at("& $Download verify-artifact"));
    assert.ok(at("& $Download verify-artifact") < at("if ($LASTEXITCODE -ne 0)"));
    assert.ok(at("if ($LASTEXITCODE -ne 0)") < at("Move-Item -LiteralPath $Download -Destination $Exe"));
    assert.ok(at("Move-Item -LiteralPath $Download") < at("Register-ScheduledTask"));
    assert.ok(at("Register-ScheduledTask") < at("Start-ScheduledTask"));
    // The only calls of a downloaded file are the signature check and the task's action on $Exe.
    assert.deepEqual(
      body.match(/^\s*& .*$/gm)?.map((l) => l.trim()),
      ["& $Download verify-artifact --public-key $PubFile --signature $SigFile $Download"],
    );
    assert.match(body, /New-ScheduledTaskPrincipal -UserId 'S-1-5-18'/);
    assert.match(body, /'fetch --from "\{0\}" --token-file "\{1\}" --apply' -f \$ConfigUrl, \$TokenFile/);
  });
});

/** CommandLineToArgvW's splitting of one quoted argument (the rules windowsArg writes for). */
function argvW(text: string): string {
  assert.ok(text.startsWith('"') && text.endsWith('"'), text);
  let out = "";
  let i = 1;
  const end = text.length - 1;
  while (i < end) {
    let backslashes = 0;
    while (text[i] === "\\" && i < end) {
      backslashes++;
      i++;
    }
    if (i === end) {
      out += "\\".repeat(backslashes / 2);
      break;
    }
    if (text[i] === '"') {
      out += "\\".repeat(Math.floor(backslashes / 2));
      assert.equal(backslashes % 2, 1, "an inner quote is escaped");
      out += '"';
    } else {
      out += "\\".repeat(backslashes) + text[i];
    }
    i++;
  }
  return out;
}

describe("PowerShell stub: cloud identity and the bootstrap command", () => {
  test("windowsArg round-trips through CommandLineToArgvW's rules", () => {
    for (const v of ['a "b" c', "C:\\path\\", 'x\\"y', "\\\\server\\share\\", "plain", "tab\tand 'quote'"]) {
      assert.equal(argvW(windowsArg(v)), v, v);
    }
  });

  test("a cloud identity: --auth, no token anywhere; the command as one --exec argument", () => {
    const params = {
      ...realisticParams(ed25519().publicKeyPem),
      auth: { method: "azure" as const },
      command: 'C:\\k\\join.cmd --name "node 1"',
    };
    const { body } = renderUserdata("powershell", params);
    const vars = singleQuotedAssignments(body);
    assert.equal(vars.get("BootstrapToken"), undefined);
    assert.ok(!body.includes("WriteAllText($TokenFile"), "no token file");
    assert.equal(vars.get("ExecArguments"), ` --exec ${windowsArg(params.command)}`);
    assert.match(
      body,
      /^\$Arguments = \('fetch --from "\{0\}" --auth azure --apply' -f \$ConfigUrl\) \+ \$ExecArguments$/m,
    );
  });

  test("a command with % is refused (Task Scheduler would expand it)", () => {
    const params = { ...realisticParams(ed25519().publicKeyPem), command: "echo %PATH%" };
    assert.throws(() => renderUserdata("powershell", params), /Task Scheduler/);
  });
});
