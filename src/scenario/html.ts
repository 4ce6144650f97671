import { offset } from './conditions.js';
import type { ReplayReport, RolloutPoint, ScenarioReport, StepReport } from './report.js';

/**
 * The `--html` report: one self-contained page (inline CSS and SVG, no scripts or external assets) with, per
 * scenario, a timeline of pods grouped by owner over cluster time with the steps marked, then the steps.
 */
export function htmlReport(report: ReplayReport): string {
  const passed = report.scenarios.filter((s) => s.result === 'passed').length;
  const title = `kube-sim replay: ${passed}/${report.scenarios.length} scenario${report.scenarios.length === 1 ? '' : 's'} passed`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
<style>${CSS}</style>
</head>
<body>
<header><h1>kube-sim replay</h1><p class="overall ${report.result}">${esc(title)}</p>
<nav>${report.scenarios.map((s, i) => `<a href="#s${i + 1}" class="${s.result}">${esc(s.name)}</a>`).join(' ')}</nav></header>
${report.scenarios.map((s, i) => scenarioSection(s, i + 1)).join('\n')}
</body>
</html>
`;
}

/** Okabe & Ito's palette, which readers with any common colour-vision deficiency tell apart. */
const STATE_COLORS: Record<string, string> = {
  Pending: '#bbbbbb',
  Running: '#e69f00',
  Ready: '#009e73',
  Terminating: '#cc79a7',
  Succeeded: '#0072b2',
  Failed: '#d55e00',
  Unknown: '#56b4e9',
};
const NODE_COLORS: Record<string, string> = { Ready: '#009e73', NotReady: '#d55e00', Unknown: '#56b4e9' };
const LINE_COLORS = { desired: '#000000', pods: '#e69f00', ready: '#009e73', available: '#0072b2' };

const CSS = `
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg:#fff;--pass:#1a7f37;--fail:#cf222e}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg);margin:0 auto;max-width:1200px;padding:16px 24px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:0}
header{border-bottom:1px solid var(--line);padding-bottom:8px;margin-bottom:16px}
nav a{margin-right:12px;text-decoration:none;color:inherit;border-bottom:2px solid}
nav a.passed{border-color:var(--pass)}nav a.failed{border-color:var(--fail)}
.overall.passed,.badge.passed{color:var(--pass)}.overall.failed,.badge.failed{color:var(--fail)}
section{margin:24px 0 40px}
.title{display:flex;gap:12px;align-items:baseline}
.badge{font-weight:700;text-transform:uppercase;font-size:12px;border:1px solid;border-radius:10px;padding:0 8px}
.meta{color:var(--muted);margin:4px 0 12px}
.failures{border-left:4px solid var(--fail);background:#fff5f5;padding:8px 12px;margin:8px 0 16px;white-space:pre-wrap;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.timeline{width:100%;height:auto;border:1px solid var(--line);border-radius:6px;background:#fafbfc}
.timeline text{font-family:system-ui,sans-serif;font-size:11px;fill:var(--fg)}
.timeline .owner{font-weight:600}.timeline .muted{fill:var(--muted)}
svg .step line{stroke:#8c959f;stroke-dasharray:3 3}
svg .step.failed line{stroke:#d55e00;stroke-dasharray:none}
svg .step.failed circle{fill:#d55e00}
svg .step circle{fill:#57606a}svg .step text{fill:#fff;font-size:9px;font-weight:700}
svg .muted{fill:var(--muted)}
table{border-collapse:collapse;width:100%;margin-top:16px}
th,td{border-bottom:1px solid var(--line);padding:6px 8px;text-align:left;vertical-align:top}
td:nth-child(-n+2),td.status{white-space:nowrap}td:last-child{overflow-wrap:anywhere}
th{font-size:12px;color:var(--muted);font-weight:600}
td.at{white-space:nowrap;font-family:ui-monospace,monospace;font-size:12px}
tr.failed td.status{color:var(--fail);font-weight:700}tr.passed td.status{color:var(--pass)}tr.skipped{color:var(--muted)}
ul{margin:4px 0;padding-left:18px}li.ok::marker{content:"✓ ";color:var(--pass)}li.bad::marker{content:"✗ ";color:var(--fail)}
.found{color:var(--fail)}
pre{background:#f6f8fa;padding:6px 8px;margin:4px 0;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}
details summary{cursor:pointer;color:var(--muted)}
.changes{font-family:ui-monospace,monospace;font-size:12px;margin:4px 0;padding:0;list-style:none}
.changes .ADDED{color:#1a7f37}.changes .DELETED{color:#cf222e}
.legend{display:flex;gap:6px 14px;flex-wrap:wrap;color:var(--fg);font-size:12px;margin:6px 0}
.legend b{font-weight:600;color:var(--muted)}
.chart{border:1px solid var(--line);border-radius:6px;background:#fafbfc;padding:6px 8px;margin:8px 0}
.chart .timeline,.chart .rollout{border:0;background:none}
.axisnote{color:var(--muted);font-size:12px;margin:2px 0 0}
.rollout{width:100%;height:auto}.rollout text{font-family:system-ui,sans-serif;font-size:11px;fill:var(--fg)}
svg a:hover circle{stroke:#000;stroke-width:2}.broke text{fill:#d55e00;font-weight:700;font-size:13px}
tr:target{outline:2px solid #0072b2}
.legend span::before{content:"";display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;vertical-align:-2px;background:var(--c)}
`;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function swatches(colors: Record<string, string>, names: Record<string, string> = {}): string {
  return Object.entries(colors)
    .map(([state, color]) => `<span style="--c:${color}">${esc(names[state] ?? state)}</span>`)
    .join('');
}

function legend(): string {
  return `<div class="legend"><b>pods</b>${swatches(STATE_COLORS, { Running: 'Running, not ready' })}<b>nodes</b>${swatches(
    NODE_COLORS,
  )}<span style="--c:repeating-linear-gradient(45deg,#57606a 0 2px,transparent 2px 5px)">cordoned</span><b>steps</b><span style="--c:#57606a">step (click: its row)</span><span style="--c:#d55e00">✗ an assertion or step failed here</span></div>`;
}

function scenarioSection(s: ScenarioReport, n: number): string {
  const sum = s.summary;
  const meta = `${esc(s.file)} · seed ${s.seed} · ${s.mode} · starts ${esc(s.start)} · ${offset(s.durationMs, 0).slice(2)} of cluster time · ${sum.steps} steps (${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped) · ${sum.expectations.passed + sum.expectations.failed} expectations (${sum.expectations.failed} failed)`;
  return `<section id="s${n}">
<div class="title"><h2>${esc(s.name)}</h2><span class="badge ${s.result}">${s.result}</span></div>
${s.description ? `<p>${esc(s.description)}</p>` : ''}<p class="meta">${meta}</p>
${s.failures.length > 0 ? `<div class="failures">${s.failures.map(esc).join('\n')}</div>` : ''}
<div class="chart">${legend()}
${timelineSvg(s, n)}
<p class="axisnote">${axisNote(s)}</p></div>
${rolloutSvgs(s, n)}
${stepsTable(s, n)}
</section>`;
}

interface Span {
  step: StepReport;
  from: number;
  to: number;
  x0: number;
  x1: number;
  /** Its width is not its share of the time: a step that took no (or hardly any) cluster time. */
  widened: boolean;
}

/**
 * Cluster time on the x axis, linear within each step and broken between them where needed: each step gets a
 * span as wide as its share of the scenario's cluster time, but at least a sliver (a week-long advance next to
 * an instant apply would leave the apply invisible). Spans so widened are where the axis is not linear; the
 * chart hatches them and its note says so. A change is drawn in the span of its step: linear in time within a
 * step that let time pass, in the middle of one that did not.
 */
function timeAxis(s: ScenarioReport, plotWidth: number): { x: (t: number, step: number) => number; spans: Span[] } {
  const startMs = Date.parse(s.start);
  const ran = s.steps.filter((st) => st.status !== 'skipped');
  const total = Math.max(s.durationMs, 1);
  const MIN = 0.04;
  const raw = ran.map((st) => {
    const from = Date.parse(st.start) - startMs;
    const to = Math.max(Date.parse(st.end) - startMs, from);
    const share = (to - from) / total;
    return { step: st, from, to, weight: Math.max(share, MIN), widened: share < MIN };
  });
  const sumWeights = raw.reduce((a, b) => a + b.weight, 0) || 1;
  let acc = 0;
  const placed = new Map<number, Span>();
  for (const sp of raw) {
    const x0 = (acc / sumWeights) * plotWidth;
    acc += sp.weight;
    placed.set(sp.step.index, {
      step: sp.step,
      from: sp.from,
      to: sp.to,
      x0,
      x1: (acc / sumWeights) * plotWidth,
      widened: sp.widened,
    });
  }
  const x = (t: number, step: number): number => {
    if (step <= 0) return 0;
    const span = placed.get(step);
    if (!span) return plotWidth;
    if (span.to === span.from) return (span.x0 + span.x1) / 2;
    const frac = Math.min(Math.max((t - span.from) / (span.to - span.from), 0), 1);
    return span.x0 + frac * (span.x1 - span.x0);
  };
  return { x, spans: [...placed.values()] };
}

const WIDTH = 1100;
const LABEL_WIDTH = 250;
const PLOT_WIDTH = WIDTH - LABEL_WIDTH - 20;
const ROW = 18;

const stepAnchor = (n: number, step: number): string => `s${n}-step${step}`;

/** The hatching behind the spans where the axis is broken (drawn first: it is background, not a target). */
function widenedBands(spans: Span[], top: number, bottom: number): string[] {
  return spans
    .filter((sp) => sp.widened && sp.x1 - sp.x0 > 1)
    .map(
      (sp) =>
        `<rect x="${r(LABEL_WIDTH + sp.x0)}" y="${top - 4}" width="${r(sp.x1 - sp.x0)}" height="${r(bottom - top + 4)}" fill="url(#widened)" pointer-events="none"/>`,
    );
}

/** Step markers linked to their rows, and where a step failed (drawn last, so that they can be clicked). */
function stepMarks(spans: Span[], n: number, top: number, bottom: number): string[] {
  const marks: string[] = [];
  for (const sp of spans) {
    const sx = LABEL_WIDTH + sp.x0;
    const cls = sp.step.status === 'failed' ? 'step failed' : 'step';
    const tip = `step ${sp.step.index}: ${sp.step.name} (${sp.step.status}) at ${sp.step.at}`;
    marks.push(
      `<a href="#${stepAnchor(n, sp.step.index)}"><g class="${cls}"><title>${esc(tip)}</title><line x1="${r(sx)}" y1="${top - 8}" x2="${r(sx)}" y2="${bottom}"/>` +
        `<circle cx="${r(sx)}" cy="${top - 16}" r="8"/><text x="${r(sx)}" y="${top - 13}" text-anchor="middle">${sp.step.index}</text></g></a>`,
    );
    if (sp.step.status === 'failed') {
      // The moment it broke: where the step ended (a waitFor timing out, an expectation checked).
      const fx = LABEL_WIDTH + (sp.to === sp.from ? (sp.x0 + sp.x1) / 2 : sp.x1);
      const why = sp.step.expectations.find((e) => !e.ok);
      const text = why ? `expected ${why.description}; found ${why.found}` : (sp.step.message ?? 'failed');
      marks.push(
        `<a href="#${stepAnchor(n, sp.step.index)}"><g class="broke"><title>${esc(`step ${sp.step.index} failed at ${sp.step.end}: ${text}`)}</title><rect x="${r(fx - 4)}" y="${top - 4}" width="16" height="${r(bottom - top + 4)}" fill="transparent"/><line x1="${r(fx)}" y1="${top - 4}" x2="${r(fx)}" y2="${bottom}" stroke="#d55e00" stroke-width="2"/><text x="${r(fx + 3)}" y="${top + 8}">✗</text></g></a>`,
      );
    }
  }
  return marks;
}

/** Time labels along the bottom: at each step's start, where there is room, and ⫽ where the axis is broken. */
function axisLabels(spans: Span[], y: number): string[] {
  const out: string[] = [
    `<line x1="${LABEL_WIDTH}" y1="${y}" x2="${LABEL_WIDTH + PLOT_WIDTH}" y2="${y}" stroke="#8c959f"/>`,
  ];
  let lastX = -100;
  let last = '';
  for (const sp of spans) {
    const sx = LABEL_WIDTH + sp.x0;
    if (sx - lastX > 56 && sp.step.at !== last) {
      out.push(`<text x="${r(sx)}" y="${y + 14}" text-anchor="middle" class="muted">${esc(sp.step.at)}</text>`);
      lastX = sx;
      last = sp.step.at;
    }
    if (sp.widened) {
      // The break mark: two short slashes across the axis.
      const mx = LABEL_WIDTH + (sp.x0 + sp.x1) / 2;
      out.push(`<path d="M${r(mx - 4)},${y + 4}l3,-8M${r(mx)},${y + 4}l3,-8" stroke="#57606a" stroke-width="1.2"/>`);
    }
  }
  return out;
}

function segmentRect(x0: number, x1: number, y: number, fill: string, tip: string, extra = ''): string {
  return `<rect x="${r(x0)}" y="${y + 2}" width="${r(Math.max(x1 - x0, 2))}" height="${ROW - 5}" rx="2" fill="${fill}"${extra}><title>${esc(tip)}</title></rect>`;
}

function timelineSvg(s: ScenarioReport, n: number): string {
  const top = 48;
  const { x, spans } = timeAxis(s, PLOT_WIDTH);
  const px = (t: number, step: number): number => LABEL_WIDTH + x(t, step);
  const rows: string[] = [];
  let y = top;
  if (s.nodes.length > 0) {
    rows.push(`<text x="8" y="${y + 13}" class="owner">nodes</text>`);
    y += ROW;
    for (const node of s.nodes) {
      rows.push(`<text x="20" y="${y + 12}">${esc(truncate(node.name, 38))}</text>`);
      for (const seg of node.segments) {
        const x0 = px(seg.from, seg.fromStep);
        const x1 = px(seg.to, seg.toStep);
        const taints = seg.taints.length > 0 ? `; taints ${seg.taints.join(', ')}` : '';
        const tip = `${node.name}: ${seg.state}${seg.unschedulable ? ', cordoned' : ''}${taints} from ${offset(seg.from, 0)} to ${offset(seg.to, 0)}`;
        rows.push(segmentRect(x0, x1, y, NODE_COLORS[seg.state] ?? NODE_COLORS.Unknown!, tip));
        if (seg.unschedulable) rows.push(segmentRect(x0, x1, y, 'url(#cordoned)', tip));
        if (seg.taints.length > 0 && x1 - x0 > 60)
          rows.push(
            `<text x="${r(x0 + 4)}" y="${y + 12}" fill="#fff" style="fill:#fff">${esc(truncate(seg.taints.map((t) => t.replace(/^node\.kubernetes\.io\//, '')).join(' '), Math.floor((x1 - x0) / 6)))}</text>`,
          );
      }
      if (node.deleted !== undefined) {
        const xd = px(node.deleted, s.steps.length + 1);
        rows.push(`<text x="${r(xd + 3)}" y="${y + 12}" class="muted">deleted</text>`);
      }
      y += ROW;
    }
    y += 6;
  }
  if (s.pods.length === 0) {
    rows.push(`<text x="${LABEL_WIDTH}" y="${y + 14}" class="muted">no pods during this scenario</text>`);
    y += ROW + 6;
  }
  for (const group of s.pods) {
    rows.push(`<text x="8" y="${y + 13}" class="owner">${esc(truncate(group.owner, 40))}</text>`);
    y += ROW;
    let set: string | undefined;
    for (const pod of group.pods) {
      if (pod.replicaSet !== undefined && pod.replicaSet !== set && group.owner.startsWith('Deployment ')) {
        set = pod.replicaSet;
        rows.push(
          `<text x="14" y="${y + 12}" class="muted">ReplicaSet ${esc(truncate(set, 26))}${pod.revision ? ` · revision ${esc(pod.revision)}` : ''}</text>`,
        );
        y += ROW;
      }
      const label = `${pod.name}${pod.node ? ` · ${pod.node}` : ''}`;
      rows.push(
        `<text x="20" y="${y + 12}">${esc(truncate(label, 38))}<title>${esc(`${pod.namespace}/${pod.name}${pod.node ? ` on ${pod.node}` : ''}`)}</title></text>`,
      );
      for (const seg of pod.segments) {
        const tip = `${pod.name}: ${seg.state} from ${offset(seg.from, 0)} to ${offset(seg.to, 0)}`;
        rows.push(
          segmentRect(
            px(seg.from, seg.fromStep),
            px(seg.to, seg.toStep),
            y,
            STATE_COLORS[seg.state] ?? STATE_COLORS.Unknown!,
            tip,
          ),
        );
      }
      if (pod.deleted !== undefined) {
        const xd = px(pod.deleted, pod.deletedStep ?? 0);
        rows.push(
          `<line x1="${r(xd)}" y1="${y + 1}" x2="${r(xd)}" y2="${y + ROW - 2}" stroke="#1f2328" stroke-width="1.5"><title>${esc(`${pod.name} deleted at ${offset(pod.deleted, 0)}`)}</title></line>`,
        );
      }
      y += ROW;
    }
    y += 6;
  }
  const height = y + 28;
  return `<svg class="timeline" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="nodes and pods over cluster time, steps marked">
<defs><pattern id="widened" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="6" fill="#d0d7de"/></pattern>
<pattern id="cordoned" width="5" height="5" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="2" height="5" fill="#1f2328" fill-opacity="0.55"/></pattern></defs>
<text x="8" y="14" class="muted">nodes, and pods by owner</text><text x="${WIDTH - 12}" y="14" text-anchor="end" class="muted">cluster time →</text>
${widenedBands(spans, top, y).join('\n')}
${rows.join('\n')}
${stepMarks(spans, n, top, y).join('\n')}
${axisLabels(spans, y + 6).join('\n')}
</svg>`;
}

/**
 * For each Deployment whose pods changed: desired, all pods, ready and available over the same axis as the
 * timeline, over the band its rolling update allows (available ≥ desired − maxUnavailable, pods ≤ desired +
 * maxSurge). With replicas 6, maxSurge 1, maxUnavailable 1 the band runs from 5 to 7.
 */
function rolloutSvgs(s: ScenarioReport, n: number): string {
  const { x, spans } = timeAxis(s, PLOT_WIDTH);
  const charts: string[] = [];
  for (const rollout of s.rollouts) {
    const points = rollout.points;
    if (points.length < 2) continue;
    const top = 40;
    const plotHeight = 150;
    const maxY = Math.max(...points.map((p) => Math.max(p.desired + p.maxSurge, p.pods, 1)));
    const yOf = (v: number): number => top + plotHeight - (v / maxY) * plotHeight;
    const endStep = s.steps.length + 1;
    const endAt = s.durationMs;
    // A step function: each value holds until the next point.
    const path = (value: (p: RolloutPoint) => number): string => {
      let d = '';
      points.forEach((p, i) => {
        const x0 = LABEL_WIDTH + x(p.at, p.step);
        const next = points[i + 1];
        const x1 = LABEL_WIDTH + (next ? x(next.at, next.step) : x(endAt, endStep));
        d += `${i === 0 ? 'M' : 'L'}${r(x0)},${r(yOf(value(p)))}H${r(x1)}`;
      });
      return d;
    };
    let band = '';
    points.forEach((p, i) => {
      const x0 = LABEL_WIDTH + x(p.at, p.step);
      const next = points[i + 1];
      const x1 = LABEL_WIDTH + (next ? x(next.at, next.step) : x(endAt, endStep));
      const hi = yOf(p.desired + p.maxSurge);
      const lo = yOf(Math.max(p.desired - p.maxUnavailable, 0));
      band += `<rect x="${r(x0)}" y="${r(hi)}" width="${r(Math.max(x1 - x0, 0.5))}" height="${r(lo - hi)}" fill="#0072b2" fill-opacity="0.12"/>`;
    });
    const ticks: string[] = [];
    for (let v = 0; v <= maxY; v += Math.max(1, Math.ceil(maxY / 6)))
      ticks.push(
        `<text x="${LABEL_WIDTH - 6}" y="${r(yOf(v) + 4)}" text-anchor="end" class="muted">${v}</text><line x1="${LABEL_WIDTH}" y1="${r(yOf(v))}" x2="${LABEL_WIDTH + PLOT_WIDTH}" y2="${r(yOf(v))}" stroke="#eaeef2"/>`,
      );
    const last = points[points.length - 1]!;
    const lines = (
      [
        ['desired', (p: RolloutPoint) => p.desired, '4 3'],
        ['pods', (p: RolloutPoint) => p.pods, ''],
        ['available', (p: RolloutPoint) => p.available, ''],
        ['ready', (p: RolloutPoint) => p.ready, '1 2'],
      ] as const
    ).map(
      ([name, value, dash]) =>
        `<path d="${path(value)}" fill="none" stroke="${LINE_COLORS[name]}" stroke-width="${name === 'ready' ? 2.5 : 2}"${dash ? ` stroke-dasharray="${dash}"` : ''}><title>${name}</title></path>`,
    );
    const height = top + plotHeight + 30;
    charts.push(`<div class="chart"><div class="legend"><b>${esc(rollout.deployment)}</b><span style="--c:${LINE_COLORS.desired}">desired (dashed)</span><span style="--c:${LINE_COLORS.pods}">pods</span><span style="--c:${LINE_COLORS.available}">available</span><span style="--c:${LINE_COLORS.ready}">ready (dotted)</span><span style="--c:rgba(0,114,178,.25)">allowed: desired − maxUnavailable … desired + maxSurge (now ${last.desired - last.maxUnavailable}…${last.desired + last.maxSurge})</span></div>
<svg class="rollout" viewBox="0 0 ${WIDTH} ${height}" width="${WIDTH}" height="${height}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="${esc(`${rollout.deployment}: pods against desired`)}">
${ticks.join('')}
${band}
${widenedBands(spans, top, top + plotHeight).join('\n')}
${lines.join('\n')}
${stepMarks(spans, n, top, top + plotHeight).join('\n')}
${axisLabels(spans, top + plotHeight + 4).join('\n')}
</svg></div>`);
  }
  return charts.join('\n');
}

function r(n: number): string {
  return (Math.round(n * 10) / 10).toString();
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** Says where the time axis is not linear. */
function axisNote(s: ScenarioReport): string {
  const widened = timeAxis(s, PLOT_WIDTH).spans.filter((sp) => sp.widened);
  if (widened.length === 0) return 'Time axis: linear in cluster time.';
  return `Time axis: linear within each step, broken at ${widened.length === 1 ? 'step' : 'steps'} ${widened.map((sp) => sp.step.index).join(', ')} (hatched, // on the axis): ${widened.length === 1 ? 'it takes' : 'they take'} little or no cluster time and ${widened.length === 1 ? 'is' : 'are'} drawn wider so that what happened in ${widened.length === 1 ? 'it' : 'them'} can be seen.`;
}

function stepsTable(s: ScenarioReport, n: number): string {
  const rows = s.steps.map((st) => {
    const parts: string[] = [];
    if (st.notes.length > 0) parts.push(`<div>${st.notes.map(esc).join('<br>')}</div>`);
    if (st.expectations.length > 0) {
      parts.push(
        `<ul>${st.expectations
          .map(
            (e) =>
              `<li class="${e.ok ? 'ok' : 'bad'}">${esc(e.description)}${e.ok ? '' : `<br><span class="found">found: ${esc(e.found)}</span>`}</li>`,
          )
          .join('')}</ul>`,
      );
    }
    if (st.message && st.expectations.length === 0) parts.push(`<pre class="found">${esc(st.message)}</pre>`);
    if (st.kubectl)
      parts.push(
        `<pre>$ kubectl ${esc(st.kubectl.args.join(' '))}\n${esc((st.kubectl.stdout + st.kubectl.stderr).trimEnd())}</pre>`,
      );
    if (st.changes.length > 0) {
      const items = st.changes
        .map(
          (c) =>
            `<li class="${c.type}">${esc(c.at)} ${c.type === 'ADDED' ? '+' : c.type === 'DELETED' ? '−' : '~'} ${esc(`${c.kind} ${c.namespace ? `${c.namespace}/` : ''}${c.name}`)}${c.summary ? ` · ${esc(c.summary)}` : ''}</li>`,
        )
        .join('');
      parts.push(
        `<details><summary>${st.changes.length} change${st.changes.length === 1 ? '' : 's'}${st.otherChanges ? ` (+${st.otherChanges} status updates)` : ''}</summary><ul class="changes">${items}</ul></details>`,
      );
    }
    return `<tr class="${st.status}" id="${stepAnchor(n, st.index)}"><td>${st.index}</td><td class="at">${esc(st.at)}</td><td>${esc(st.name)}</td><td class="status">${st.status}</td><td>${parts.join('')}</td></tr>`;
  });
  return `<table><thead><tr><th>#</th><th>at</th><th>step</th><th>result</th><th>details</th></tr></thead><tbody>
${rows.join('\n')}
</tbody></table>`;
}
