// A bar chart of visits over time, drawn as SVG elements (no HTML from data).

import { svg } from './dom.js';

export function barChart(series, granularity) {
  const width = 720;
  const height = 180;
  const pad = { left: 36, right: 8, top: 8, bottom: 22 };
  const chart = svg('svg', { class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img' });
  const max = Math.max(1, ...series.map((p) => p.human));
  const total = series.reduce((n, p) => n + p.human, 0);
  const title = svg('title');
  title.textContent = `${total} visits by people, ${granularity === 'hour' ? 'hourly' : 'daily'}, peak ${max}`;
  chart.append(title);
  const inner = width - pad.left - pad.right;
  const step = series.length ? inner / series.length : inner;
  series.forEach((point, i) => {
    const h = ((height - pad.top - pad.bottom) * point.human) / max;
    const bar = svg('rect', {
      class: 'bar', x: pad.left + i * step, y: height - pad.bottom - h,
      width: Math.max(1, step - 1), height: h,
    });
    const tip = svg('title');
    tip.textContent = `${new Date(point.at).toLocaleString()}: ${point.human}`;
    bar.append(tip);
    chart.append(bar);
  });
  const label = (x, y, text, anchor = 'start') => {
    const t = svg('text', { x, y, 'text-anchor': anchor });
    t.textContent = text;
    chart.append(t);
  };
  label(2, pad.top + 8, String(max));
  label(2, height - pad.bottom, '0');
  if (series.length) {
    const fmt = (p) => (granularity === 'hour'
      ? new Date(p.at).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit' })
      : new Date(p.at).toLocaleDateString());
    label(pad.left, height - 6, fmt(series[0]));
    label(width - pad.right, height - 6, fmt(series[series.length - 1]), 'end');
  }
  return chart;
}
