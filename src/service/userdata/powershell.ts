/**
 * The PowerShell stub for cloudbase-init (#ps1_sysnative: run by the 64-bit Windows
 * PowerShell 5.1 as LocalSystem). It writes the token under an ACL that only SYSTEM and
 * Administrators can read, downloads bootseal.exe, checks the pinned SHA-256 before
 * anything downloaded runs, has the Ed25519 signature checked by `bootseal.exe
 * verify-artifact` (Windows PowerShell 5.1 has no Ed25519 verifier: see docs/userdata.md),
 * then registers the bootseal-fetch scheduled task (at startup, as SYSTEM) and starts it.
 *
 * Every value is a single-quoted PowerShell literal (psSingleQuoted): nothing in it expands.
 * The bootstrap command reaches `bootseal.exe fetch --exec` as one Windows command-line
 * argument (windowsArg); Task Scheduler expands `%NAME%` in a task's arguments, so a command
 * with `%` is refused here rather than changed on the machine. A machine that logs in with
 * its cloud identity gets `--auth METHOD` and no token file.
 */

/** The task's fetch arguments after `--from "<url>"`: how it authenticates, and the command. */
function taskArguments(p: CheckedParams): { auth: string; exec: string } {
  let exec = "";
  if (p.command !== undefined) {
    if (p.command.includes("%")) {
      throw new BootsealError(
        "BAD_INPUT",
        "command: holds '%', which Windows Task Scheduler would expand in the task's arguments",
      );
    }
    exec = ` --exec ${windowsArg(p.command)}`;
  }
  const skip = p.skipModules.map((name) => ` --skip-module ${name}`).join("");
  return { auth: p.auth.method === "token" ? "token" : authArgs(p.auth), exec: `${skip}${exec}` };
}

import { BootsealError } from "../../errors.ts";
import { psSingleQuoted, windowsArg } from "./escape.ts";
import { authArgs, type CheckedParams } from "./params.ts";

export const POWERSHELL_HEADER = "#ps1_sysnative\n";
export const WINDOWS_TASK_PATH = "\\bootseal\\";
export const WINDOWS_TASK_NAME = "bootseal-fetch";

export function renderPowerShell(p: CheckedParams): string {
  const q = psSingleQuoted;
  const task = taskArguments(p);
  const tokenLines =
    p.auth.method === "token"
      ? `
# The token: created empty, given the private ACL, and only then written (no BOM, no newline).
if (Test-Path -LiteralPath $TokenFile) { Remove-Item -LiteralPath $TokenFile -Force }
New-Item -ItemType File -Path $TokenFile | Out-Null
Set-Acl -LiteralPath $TokenFile -AclObject (New-PrivateAcl $false)
[System.IO.File]::WriteAllText($TokenFile, $BootstrapToken, $Utf8)`
      : `
# This machine logs in with its cloud identity (${p.auth.method}): there is no token to write.`;
  const tokenVariable = p.auth.method === "token" ? `$BootstrapToken = ${q(p.auth.token)}\n` : "";
  const authArgument =
    task.auth === "token"
      ? `'fetch --from "{0}" --token-file "{1}" --apply' -f $ConfigUrl, $TokenFile`
      : `${q(`fetch --from "{0}" ${task.auth} --apply`)} -f $ConfigUrl`;
  return `${POWERSHELL_HEADER}# bootseal user-data stub for cloudbase-init (docs/userdata.md): writes the bootstrap
# token if it has one (SYSTEM and Administrators only), downloads bootseal.exe, checks its SHA-256 and its
# Ed25519 signature, registers the bootseal-fetch scheduled task and starts it.
$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 2.0
$ProgressPreference = 'SilentlyContinue'
[Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12

$BootsealMachine = ${q(p.machine)}
$ConfigUrl = ${q(p.configUrl)}
$ArtifactUrl = ${q(p.artifactUrl)}
$ArtifactSha256 = ${q(p.artifactSha256)}
$SignatureUrl = ${q(p.signatureUrl)}
$PublicKeyPem = ${q(p.publicKeyPem)}
$ExecArguments = ${q(task.exec)}
${tokenVariable}
$DataDir = Join-Path $env:ProgramData 'bootseal'
$BinDir = Join-Path $env:ProgramFiles 'bootseal'
$TokenFile = Join-Path $DataDir 'token'
$PubFile = Join-Path $DataDir 'artifact.pub'
$Exe = Join-Path $BinDir 'bootseal.exe'
$Download = Join-Path $BinDir 'bootseal.download.exe'
$SigFile = Join-Path $BinDir 'bootseal.download.sig'
$Utf8 = New-Object System.Text.UTF8Encoding $false

# An ACL with no inherited entries that grants SYSTEM and BUILTIN\\Administrators only.
function New-PrivateAcl([bool]$Directory) {
  if ($Directory) {
    $acl = New-Object System.Security.AccessControl.DirectorySecurity
    $inherit = [System.Security.AccessControl.InheritanceFlags]'ContainerInherit, ObjectInherit'
  } else {
    $acl = New-Object System.Security.AccessControl.FileSecurity
    $inherit = [System.Security.AccessControl.InheritanceFlags]::None
  }
  $acl.SetAccessRuleProtection($true, $false)
  foreach ($sid in @('S-1-5-18', 'S-1-5-32-544')) {
    $id = New-Object System.Security.Principal.SecurityIdentifier $sid
    $rule = New-Object System.Security.AccessControl.FileSystemAccessRule($id,
      [System.Security.AccessControl.FileSystemRights]::FullControl, $inherit,
      [System.Security.AccessControl.PropagationFlags]::None,
      [System.Security.AccessControl.AccessControlType]::Allow)
    $acl.AddAccessRule($rule)
  }
  $acl.SetOwner((New-Object System.Security.Principal.SecurityIdentifier 'S-1-5-32-544'))
  return $acl
}

New-Item -ItemType Directory -Force -Path $DataDir | Out-Null
New-Item -ItemType Directory -Force -Path $BinDir | Out-Null
Set-Acl -LiteralPath $DataDir -AclObject (New-PrivateAcl $true)
${tokenLines}
[System.IO.File]::WriteAllText($PubFile, $PublicKeyPem, $Utf8)

function Get-WithRetry([string]$Uri, [string]$OutFile) {
  for ($i = 1; ; $i++) {
    try {
      Invoke-WebRequest -UseBasicParsing -Uri $Uri -OutFile $OutFile
      return
    } catch {
      if ($i -ge 10) { throw }
      Start-Sleep -Seconds ([Math]::Min(60, 3 * $i))
    }
  }
}

function Get-Sha256([string]$Path) {
  return (Get-FileHash -Algorithm SHA256 -LiteralPath $Path).Hash.ToLowerInvariant()
}

$installed = (Test-Path -LiteralPath $Exe) -and ((Get-Sha256 $Exe) -eq $ArtifactSha256)
if (-not $installed) {
  Remove-Item -LiteralPath $Download -Force -ErrorAction SilentlyContinue
  Remove-Item -LiteralPath $SigFile -Force -ErrorAction SilentlyContinue
  try {
    Get-WithRetry $ArtifactUrl $Download
    Get-WithRetry $SignatureUrl $SigFile
    # 1. The SHA-256 pinned in this user data: checked before anything downloaded runs.
    if ((Get-Sha256 $Download) -ne $ArtifactSha256) {
      throw 'bootseal: SHA-256 mismatch: the downloaded executable is not the pinned one; refusing to run it'
    }
    # 2. The Ed25519 signature. Windows PowerShell 5.1 cannot verify Ed25519, so the
    #    executable whose hash has just matched the pin checks it (docs/userdata.md).
    & $Download verify-artifact --public-key $PubFile --signature $SigFile $Download
    if ($LASTEXITCODE -ne 0) {
      throw 'bootseal: Ed25519 signature check failed; refusing to install the executable'
    }
    Move-Item -LiteralPath $Download -Destination $Exe -Force
  } finally {
    Remove-Item -LiteralPath $Download -Force -ErrorAction SilentlyContinue
    Remove-Item -LiteralPath $SigFile -Force -ErrorAction SilentlyContinue
  }
}

# The fetcher runs as SYSTEM at every startup (a marker file makes a run after success a
# no-op) and now. Retries are those of bootseal fetch itself.
$Arguments = (${authArgument}) + $ExecArguments
$Action = New-ScheduledTaskAction -Execute $Exe -Argument $Arguments
$Trigger = New-ScheduledTaskTrigger -AtStartup
$Principal = New-ScheduledTaskPrincipal -UserId 'S-1-5-18' -LogonType ServiceAccount -RunLevel Highest
$Settings = New-ScheduledTaskSettingsSet -StartWhenAvailable -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries -ExecutionTimeLimit (New-TimeSpan -Minutes 30) -RestartCount 5 -RestartInterval (New-TimeSpan -Minutes 1)
Register-ScheduledTask -TaskPath ${q(WINDOWS_TASK_PATH)} -TaskName ${q(WINDOWS_TASK_NAME)} -Action $Action -Trigger $Trigger -Principal $Principal -Settings $Settings -Force | Out-Null
Start-ScheduledTask -TaskPath ${q(WINDOWS_TASK_PATH)} -TaskName ${q(WINDOWS_TASK_NAME)}
`;
}
