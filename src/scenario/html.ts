import { offset } from './conditions.js';
import type { ReplayReport, ScenarioReport, StepReport } from './report.js';

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
<footer>${legend()}</footer>
</body>
</html>
`;
}

const STATE_COLORS: Record<string, string> = {
  Pending: '#adb5bd',
  Running: '#f59f00',
  Ready: '#2f9e44',
  Terminating: '#e8590c',
  Succeeded: '#1c7ed6',
  Failed: '#e03131',
  Unknown: '#9c36b5',
};

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
.timeline .step line{stroke:#8c959f;stroke-dasharray:3 3}
.timeline .step.failed line{stroke:var(--fail);stroke-dasharray:none}
.timeline .step.failed circle{fill:var(--fail)}
.timeline .step circle{fill:#57606a}.timeline .step text{fill:#fff;font-size:9px;font-weight:700}
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
.legend{display:flex;gap:14px;flex-wrap:wrap;color:var(--muted);font-size:12px;margin-top:24px}
.legend span::before{content:"";display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;vertical-align:-2px;background:var(--c)}
`;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function legend(): string {
  return `<div class="legend">${Object.entries(STATE_COLORS)
    .map(([state, color]) => `<span style="--c:${color}">${state === 'Running' ? 'Running, not ready' : state}</span>`)
    .join('')}<span style="--c:#8c959f">step (dashed; red: failed)</span></div>`;
}

function scenarioSection(s: ScenarioReport, n: number): string {
  const sum = s.summary;
  const meta = `${esc(s.file)} · seed ${s.seed} · ${s.mode} · starts ${esc(s.start)} · ${offset(s.durationMs, 0).slice(2)} of cluster time · ${sum.steps} steps (${sum.passed} passed, ${sum.failed} failed, ${sum.skipped} skipped) · ${sum.expectations.passed + sum.expectations.failed} expectations (${sum.expectations.failed} failed)`;
  return `<section id="s${n}">
<div class="title"><h2>${esc(s.name)}</h2><span class="badge ${s.result}">${s.result}</span></div>
${s.description ? `<p>${esc(s.description)}</p>` : ''}<p class="meta">${meta}</p>
${s.failures.length > 0 ? `<div class="failures">${s.failures.map(esc).join('\n')}</div>` : ''}
${timelineSvg(s)}
${stepsTable(s)}
</section>`;
}

/**
 * Cluster time on the x axis, warped so every step gets room: each step has a span, at least a sliver
 * wide, otherwise as wide as its share of the scenario's cluster time (a week-long advance next to an
 * instant apply would leave the apply invisible). A change is drawn in the span of the step it happened in:
 * linear in time within a step that let time pass, in the middle of one that did not.
 */
function timeAxis(
  s: ScenarioReport,
  plotWidth: number,
): { x: (t: number, step: number) => number; spans: Array<{ step: StepReport; x0: number }> } {
  const startMs = Date.parse(s.start);
  const ran = s.steps.filter((st) => st.status !== 'skipped');
  const total = Math.max(s.durationMs, 1);
  const raw = ran.map((st) => {
    const from = Date.parse(st.start) - startMs;
    const to = Math.max(Date.parse(st.end) - startMs, from);
    return { step: st, from, to, weight: Math.max((to - from) / total, 0.04) };
  });
  const sumWeights = raw.reduce((a, b) => a + b.weight, 0) || 1;
  let acc = 0;
  const placed = new Map<number, { step: StepReport; from: number; to: number; x0: number; x1: number }>();
  for (const sp of raw) {
    const x0 = (acc / sumWeights) * plotWidth;
    acc += sp.weight;
    placed.set(sp.step.index, { ...sp, x0, x1: (acc / sumWeights) * plotWidth });
  }
  const x = (t: number, step: number): number => {
    if (step <= 0) return 0;
    const span = placed.get(step);
    if (!span) return plotWidth;
    if (span.to === span.from) return (span.x0 + span.x1) / 2;
    const frac = Math.min(Math.max((t - span.from) / (span.to - span.from), 0), 1);
    return span.x0 + frac * (span.x1 - span.x0);
  };
  return { x, spans: [...placed.values()].map((p) => ({ step: p.step, x0: p.x0 })) };
}

function timelineSvg(s: ScenarioReport): string {
  const width = 1100;
  const labelWidth = 250;
  const plotWidth = width - labelWidth - 20;
  const rowHeight = 18;
  const top = 48;
  const { x, spans } = timeAxis(s, plotWidth);
  const rows: string[] = [];
  let y = top;
  if (s.pods.length === 0) {
    rows.push(`<text x="${labelWidth}" y="${y + 14}" class="muted">no pods during this scenario</text>`);
    y += rowHeight + 6;
  }
  for (const group of s.pods) {
    rows.push(`<text x="8" y="${y + 13}" class="owner">${esc(truncate(group.owner, 40))}</text>`);
    y += rowHeight;
    for (const pod of group.pods) {
      const label = `${pod.name}${pod.node ? ` · ${pod.node}` : ''}`;
      rows.push(
        `<text x="20" y="${y + 12}">${esc(truncate(label, 38))}<title>${esc(`${pod.namespace}/${pod.name}${pod.node ? ` on ${pod.node}` : ''}`)}</title></text>`,
      );
      for (const seg of pod.segments) {
        const x0 = labelWidth + x(seg.from, seg.fromStep);
        const x1 = Math.max(labelWidth + x(seg.to, seg.toStep), x0 + 2);
        const tip = `${pod.name}: ${seg.state} from ${offset(seg.from, 0)} to ${offset(seg.to, 0)}`;
        rows.push(
          `<rect x="${r(x0)}" y="${y + 2}" width="${r(x1 - x0)}" height="${rowHeight - 5}" rx="2" fill="${STATE_COLORS[seg.state] ?? STATE_COLORS.Unknown}"><title>${esc(tip)}</title></rect>`,
        );
      }
      if (pod.deleted !== undefined) {
        const xd = labelWidth + x(pod.deleted, pod.deletedStep ?? 0);
        rows.push(
          `<line x1="${r(xd)}" y1="${y + 1}" x2="${r(xd)}" y2="${y + rowHeight - 2}" stroke="#1f2328" stroke-width="1.5"><title>${esc(`${pod.name} deleted at ${offset(pod.deleted, 0)}`)}</title></line>`,
        );
      }
      y += rowHeight;
    }
    y += 6;
  }
  const height = y + 24;
  const marks: string[] = [];
  let lastLabelX = -100;
  let lastLabel = '';
  for (const { step, x0 } of spans) {
    const sx = labelWidth + x0;
    const cls = step.status === 'failed' ? 'step failed' : 'step';
    const tip = `step ${step.index}: ${step.name} (${step.status}) at ${step.at}`;
    marks.push(
      `<g class="${cls}"><title>${esc(tip)}</title><line x1="${r(sx)}" y1="${top - 8}" x2="${r(sx)}" y2="${y}"/>` +
        `<circle cx="${r(sx)}" cy="${top - 16}" r="8"/><text x="${r(sx)}" y="${top - 13}" text-anchor="middle">${step.index}</text></g>`,
    );
    if (sx - lastLabelX > 56 && step.at !== lastLabel) {
      marks.push(`<text x="${r(sx)}" y="${height - 8}" text-anchor="middle" class="muted">${esc(step.at)}</text>`);
      lastLabelX = sx;
      lastLabel = step.at;
    }
  }
  return `<svg class="timeline" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" xmlns="http://www.w3.org/2000/svg" role="img" aria-label="pods per owner over cluster time, steps marked">
<text x="8" y="14" class="muted">pods by owner</text><text x="${width - 12}" y="14" text-anchor="end" class="muted">cluster time →</text>
${marks.join('\n')}
${rows.join('\n')}
</svg>`;
}

function r(n: number): string {
  return (Math.round(n * 10) / 10).toString();
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function stepsTable(s: ScenarioReport): string {
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
    return `<tr class="${st.status}"><td>${st.index}</td><td class="at">${esc(st.at)}</td><td>${esc(st.name)}</td><td class="status">${st.status}</td><td>${parts.join('')}</td></tr>`;
  });
  return `<table><thead><tr><th>#</th><th>at</th><th>step</th><th>result</th><th>details</th></tr></thead><tbody>
${rows.join('\n')}
</tbody></table>`;
}
