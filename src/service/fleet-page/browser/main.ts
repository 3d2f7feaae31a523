/**
 * The fleet page (docs/api.md "The fleet page"): wires the service API client (api.ts), the
 * level-triggered machine state (sync.ts) and the DOM (view.ts): sign-in, sign-out, selecting
 * a machine. The token is kept in sessionStorage only (this tab, until it closes); a 401 or
 * 403 clears it.
 */
import { errorText, isAbort, Refused } from "./api.ts";
import { FleetSync } from "./sync.ts";
import * as view from "./view.ts";

const TOKEN_KEY = "bootseal.fleet.token";

const sync: FleetSync = new FleetSync({
  changed: () => view.render(sync),
  selectedRead: (record) => view.renderDetail(record),
  live: (live) => view.setLive(live),
  failed: (text) => view.setMessage(text, "error"),
  refused,
});

function refused(code: string): void {
  signOut();
  view.setMessage(
    `refused${code ? ` (${code})` : ""}: the credential was not accepted; sign in again`,
    "error",
  );
}

function signOut(): void {
  sync.stop();
  sessionStorage.removeItem(TOKEN_KEY);
  view.showSignIn();
  view.setMessage("signed out");
}

async function signIn(token: string): Promise<void> {
  const signal = sync.begin(token);
  view.setMessage("loading…");
  try {
    await sync.loadAll(signal);
  } catch (err) {
    if (err instanceof Refused) return refused(err.message);
    if (isAbort(err)) return;
    view.setMessage(`could not list machines: ${errorText(err)}`, "error");
    return;
  }
  sessionStorage.setItem(TOKEN_KEY, token);
  view.showFleet();
  view.setMessage("");
  sync.follow(signal);
}

async function select(key: string): Promise<void> {
  sync.selected = key;
  const [ns, name] = key.split("/") as [string, string];
  view.render(sync);
  view.renderLoading(key);
  await sync.refresh(ns, name);
}

view.setUp({
  signIn: (token) => void signIn(token),
  signOut,
  select: (key) => void select(key),
  redraw: () => view.render(sync),
});
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) void signIn(saved);
