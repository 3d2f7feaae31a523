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
/**
 * Draws at most once per DRAW_MS: a boot storm's events change rows hundreds of times a
 * second, and each draw sorts and counts the whole fleet (up to 20,000 machines).
 */
const DRAW_MS = 400;
/** Relative times ("3m ago") and stuck markers move on with no event: drawn again this often. */
const TICK_MS = 10_000;

let drawTimer = 0;
let stormTimer = 0;
function draw(): void {
  if (drawTimer) return;
  drawTimer = window.setTimeout(() => {
    drawTimer = 0;
    drawNow();
  }, DRAW_MS);
}

/** The counts and the table now, the storm view in the next task (two short tasks, not one long). */
function drawNow(): void {
  view.render(sync);
  window.clearTimeout(stormTimer);
  stormTimer = window.setTimeout(() => view.renderStormView(sync), 0);
}
window.setInterval(() => {
  if (sync.rows.size > 0) draw();
}, TICK_MS);

const sync: FleetSync = new FleetSync({
  changed: draw,
  pageRead: (rows) => view.prepare(rows),
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
  window.clearTimeout(drawTimer);
  window.clearTimeout(stormTimer);
  drawTimer = 0;
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
  draw();
  view.renderLoading(key);
  await sync.refresh(ns, name);
}

view.setUp({
  signIn: (token) => void signIn(token),
  signOut,
  select: (key) => void select(key),
  // A control the operator used: at once.
  redraw: drawNow,
});
const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) void signIn(saved);
