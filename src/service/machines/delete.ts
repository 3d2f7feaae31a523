/**
 * Deleting a machine's config and its bootstrap token. A controller may always; the machine
 * itself (token checked by the auth plugin) only when one-time fetch is on and it has
 * reported `succeeded`, so a machine cannot throw away a config it has not used.
 *
 * The machine's DELETE is idempotent: with `after-success` the service already deleted the
 * config when it took `succeeded` (and kept the token, bound to that deleted config, so this
 * request still authenticates), and `bootseal fetch --one-time` sends its DELETE after that.
 * The config being gone is then the outcome it asked for: 204, and the token record goes too.
 */
import { BootsealError } from "../../errors.ts";
import { formatMachineId, type MachineId } from "../../machine/machine-id.ts";
import type { ServiceContext } from "../context.ts";

export async function deleteConfig(ctx: ServiceContext, m: MachineId, byMachine: boolean): Promise<void> {
  const { machines } = ctx;
  const now = ctx.now();
  if (byMachine) {
    if (ctx.oneTimeFetch === "off") {
      throw new BootsealError("FORBIDDEN", "a machine may delete its config only when one-time fetch is on");
    }
    const status = await machines.readStatus(m);
    if (status?.value.phase !== "succeeded") {
      throw new BootsealError("FORBIDDEN", "a machine may delete its config only after reporting succeeded");
    }
  }
  const existed = await machines.deleteConfigAndToken(m);
  if (!existed && byMachine) return;
  if (!existed) throw new BootsealError("NOT_FOUND", `no config is published for ${formatMachineId(m)}`);
  await machines.recordDeleted(m, now);
}
