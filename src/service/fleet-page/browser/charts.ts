/**
 * The storm view's charts, SVG drawn by hand (no charting library: three small charts are
 * less code than a dependency, and the page's CSP allows no inline style, which most libraries
 * set): phase counts over time as stacked areas, `succeeded` per step as bars, and the
 * boot-duration histogram with its p50 and p99. Colours come from style.css by class.
 */
import { PHASES } from "../../../machine/status-protocol.ts";
import type { Histogram, PhaseSeries } from "./fleet-stats.ts";
import { durationText } from "./time-text.ts";

const SVG = "http://www.w3.org/2000/svg";
const W = 560;
const H = 150;
/** Room for the axis labels: left and bottom. */
const PAD_L = 40;
const PAD_B = 18;
const PAD_T = 8;

function svg(
  tag: string,
  attrs: Record<string, string | number>,
  ...children: (Node | string)[]
): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children) node.append(typeof c === "string" ? document.createTextNode(c) : c);
  return node;
}

const fmt = (n: number) => String(Math.round(n * 100) / 100);

/** An empty chart with its y axis up to `max` and x labels. */
function frame(label: string, max: number, xLabels: [number, string][]): SVGElement {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": label, class: "chart" });
  const plotH = H - PAD_B - PAD_T;
  root.append(
    svg("line", { class: "axis", x1: PAD_L, y1: H - PAD_B, x2: W, y2: H - PAD_B }),
    svg("line", { class: "axis", x1: PAD_L, y1: PAD_T, x2: PAD_L, y2: H - PAD_B }),
    svg("text", { class: "tick", x: PAD_L - 4, y: PAD_T + 8, "text-anchor": "end" }, String(max)),
    svg("text", { class: "tick", x: PAD_L - 4, y: PAD_T + plotH, "text-anchor": "end" }, "0"),
  );
  xLabels.forEach(([x, text], i) => {
    // The last label ends at the right edge, so it is not cut off.
    const anchor = i === xLabels.length - 1 ? "end" : i === 0 ? "start" : "middle";
    root.append(svg("text", { class: "tick", x: fmt(x), y: H - 4, "text-anchor": anchor }, text));
  });
  return root;
}

const xOfSample = (k: number, samples: number) => PAD_L + ((W - PAD_L) * k) / Math.max(1, samples - 1);
const yOf = (v: number, max: number) => H - PAD_B - ((H - PAD_B - PAD_T) * v) / Math.max(1, max);

function timeLabels(series: PhaseSeries, samples: number): [number, string][] {
  const minutes = Math.round(((samples - 1) * series.stepMs) / 60_000);
  return [
    [xOfSample(0, samples), `-${minutes}m`],
    [xOfSample((samples - 1) / 2, samples), `-${minutes / 2}m`],
    [xOfSample(samples - 1, samples), "now"],
  ];
}

/** The phase counts over time, stacked in boot order, one area per phase. */
export function phaseChart(series: PhaseSeries): SVGElement {
  const samples = series.succeeded.length;
  const totals = series.succeeded.map((_, k) =>
    PHASES.reduce((sum, p) => sum + (series.counts[p][k] ?? 0), 0),
  );
  const max = Math.max(1, ...totals);
  const root = frame("machines per phase over the last hour", max, timeLabels(series, samples));
  const below = new Array<number>(samples).fill(0);
  for (const phase of PHASES) {
    const values = series.counts[phase];
    if (!values.some((v) => v > 0)) continue;
    const top = values.map((v, k) => below[k]! + v);
    const upper = top.map((v, k) => `${fmt(xOfSample(k, samples))},${fmt(yOf(v, max))}`);
    const lower = below.map((v, k) => `${fmt(xOfSample(k, samples))},${fmt(yOf(v, max))}`).reverse();
    root.append(
      svg(
        "path",
        { class: `area phase-${phase}`, "data-phase": phase, d: `M${upper.join("L")}L${lower.join("L")}Z` },
        svg("title", {}, `${phase}: now ${values[samples - 1] ?? 0}, at most ${Math.max(...values)}`),
      ),
    );
    for (let k = 0; k < samples; k++) below[k] = top[k]!;
  }
  return root;
}

/** The phase chart's colours: a swatch and the phase's name each. */
export function phaseLegend(): SVGElement {
  const root = svg("svg", { viewBox: `0 0 ${W} 14`, class: "chart legend", "aria-hidden": "true" });
  const step = (W - PAD_L) / PHASES.length;
  PHASES.forEach((phase, i) => {
    const x = PAD_L + i * step;
    root.append(
      svg("rect", { class: `phase-${phase}`, x: fmt(x), y: 3, width: 9, height: 9 }),
      svg("text", { class: "tick", x: fmt(x + 12), y: 11 }, phase),
    );
  });
  return root;
}

/** `succeeded` per step, as bars. */
export function rateChart(series: PhaseSeries): SVGElement {
  const samples = series.succeeded.length;
  const max = Math.max(1, ...series.succeeded);
  const root = frame("machines succeeded per minute", max, timeLabels(series, samples));
  const barW = (W - PAD_L) / samples;
  series.succeeded.forEach((n, k) => {
    if (n === 0) return;
    const x = xOfSample(k, samples) - barW / 2;
    root.append(
      svg(
        "rect",
        {
          class: "bar phase-succeeded",
          x: fmt(Math.max(PAD_L, x)),
          y: fmt(yOf(n, max)),
          width: fmt(barW * 0.8),
          height: fmt(H - PAD_B - yOf(n, max)),
        },
        svg("title", {}, `${n} succeeded`),
      ),
    );
  });
  return root;
}

/** The boot durations, one bar per bin, with lines at p50 and p99. */
export function histogramChart(h: Histogram): SVGElement {
  const max = Math.max(1, ...h.bins);
  const span = h.bins.length * h.binMs;
  const xOfMs = (ms: number) => PAD_L + ((W - PAD_L) * ms) / span;
  const root = frame("boot durations", max, [
    [xOfMs(0), "0"],
    [xOfMs(span / 2), durationText(span / 2)],
    [xOfMs(span), durationText(span)],
  ]);
  h.bins.forEach((n, i) => {
    if (n === 0) return;
    root.append(
      svg(
        "rect",
        {
          class: "bar",
          x: fmt(xOfMs(i * h.binMs) + 0.5),
          y: fmt(yOf(n, max)),
          width: fmt(Math.max(1, xOfMs(h.binMs) - PAD_L - 1)),
          height: fmt(H - PAD_B - yOf(n, max)),
        },
        svg("title", {}, `${n} booted in ${durationText(i * h.binMs)} to ${durationText((i + 1) * h.binMs)}`),
      ),
    );
  });
  for (const [name, ms] of [
    ["p50", h.p50],
    ["p99", h.p99],
  ] as const) {
    if (!Number.isFinite(ms)) continue;
    const x = fmt(xOfMs(ms));
    root.append(
      svg("line", { class: `marker ${name}`, "data-marker": name, x1: x, y1: PAD_T, x2: x, y2: H - PAD_B }),
      svg(
        "text",
        { class: "tick", x, y: PAD_T + (name === "p50" ? 8 : 20), "text-anchor": "start" },
        ` ${name}`,
      ),
    );
  }
  return root;
}
