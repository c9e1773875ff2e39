// A bar chart of visits over a whole period, drawn as SVG elements (no HTML from data): one
// bar per hour or UTC day of the period, empty ones drawn empty, with the period's start, end
// and a few ticks between them on the time axis.

import { svg } from './dom.js';

const HOUR = 3600e3;
const DAY = 24 * HOUR;

/// The periods a chart offers: how many buckets of which granularity end with the current one.
export const PERIODS = [
  { key: '24h', label: 'Last 24 hours, hourly', granularity: 'hour', buckets: 24 },
  { key: '7d', label: 'Last 7 days, hourly', granularity: 'hour', buckets: 168 },
  { key: '30d', label: 'Last 30 days, daily', granularity: 'day', buckets: 30 },
  { key: '90d', label: 'Last 90 days, daily', granularity: 'day', buckets: 90 },
];

/// The buckets of `period` at `now` (ms): the last is the hour (or UTC day) `now` is in, as
/// the stats API buckets visits.
export function span(period, now = Date.now()) {
  const width = period.granularity === 'hour' ? HOUR : DAY;
  const end = Math.floor(now / width) * width + width;
  return { ...period, width, start: end - period.buckets * width, end };
}

/// The period's buckets with the human visits of `series` added in (points before the start,
/// such as a compacted day, count in the first bucket).
export function fill(series, s) {
  const counts = new Array(s.buckets).fill(0);
  for (const point of series) {
    const at = Date.parse(point.at);
    if (Number.isNaN(at) || at >= s.end) continue;
    const i = Math.max(0, Math.floor((at - s.start) / s.width));
    counts[i] += point.human;
  }
  return counts;
}

const pad2 = (n) => String(n).padStart(2, '0');
const dayText = (t, utc) => t.toLocaleDateString([], { month: 'short', day: 'numeric', ...(utc ? { timeZone: 'UTC' } : {}) });
const hourText = (t) => `${pad2(t.getHours())}:${pad2(t.getMinutes())}`;

/// The time axis: [position in buckets, text]. Hourly charts mark bucket edges in local time
/// (the two ends with their dates); daily charts name UTC days under their bars.
function ticks(s) {
  const marks = [];
  const gap = s.buckets / 8;
  if (s.granularity === 'hour') {
    const every = s.buckets <= 24 ? 6 : 24;
    marks.push([0, `${dayText(new Date(s.start))} ${hourText(new Date(s.start))}`]);
    for (let k = 1; k < s.buckets; k += 1) {
      const t = new Date(s.start + k * s.width);
      if (t.getMinutes() !== 0 || t.getHours() % every !== 0) continue;
      if (k < gap || s.buckets - k < gap) continue;
      marks.push([k, every >= 24 ? dayText(t) : hourText(t)]);
    }
    marks.push([s.buckets, `${dayText(new Date(s.end))} ${hourText(new Date(s.end))}`]);
  } else {
    const every = s.buckets <= 30 ? 7 : 15;
    const day = (i) => dayText(new Date(s.start + i * s.width), true);
    marks.push([0.5, day(0)]);
    for (let i = s.buckets - 1 - every; i > 0; i -= every) {
      if (i < gap || s.buckets - 1 - i < gap) continue;
      marks.push([i + 0.5, day(i)]);
    }
    marks.push([s.buckets - 0.5, day(s.buckets - 1)]);
    marks.sort((a, b) => a[0] - b[0]);
  }
  return marks;
}

/// The chart of `series` (the stats API's points) over the span `s`.
export function barChart(series, s) {
  const width = 720;
  const height = 180;
  const pad = { left: 36, right: 12, top: 8, bottom: 22 };
  const counts = fill(series, s);
  const max = Math.max(1, ...counts);
  const total = counts.reduce((n, c) => n + c, 0);
  const chart = svg('svg', { class: 'chart', viewBox: `0 0 ${width} ${height}`, role: 'img' });
  const title = svg('title');
  title.textContent = `${total} visits by people, ${s.label.toLowerCase()}, peak ${max}`;
  chart.append(title);
  const inner = width - pad.left - pad.right;
  const step = inner / s.buckets;
  const x = (position) => pad.left + position * step;
  const base = height - pad.bottom;
  const text = (at, y, words, anchor, cls) => {
    const t = svg('text', { x: at, y, 'text-anchor': anchor, class: cls });
    t.textContent = words;
    chart.append(t);
  };
  const marks = ticks(s);
  for (const [position] of marks) {
    chart.append(svg('line', { class: 'grid', x1: x(position), x2: x(position), y1: pad.top, y2: base }));
  }
  counts.forEach((count, i) => {
    const h = ((base - pad.top) * count) / max;
    const bar = svg('rect', {
      class: count ? 'bar' : 'bar empty', x: x(i) + (step > 3 ? 0.5 : 0), y: base - h,
      width: Math.max(1, step > 3 ? step - 1 : step), height: h, 'data-visits': count,
    });
    const tip = svg('title');
    const at = new Date(s.start + i * s.width);
    const when = s.granularity === 'hour' ? `${dayText(at)} ${hourText(at)}` : dayText(at, true);
    tip.textContent = `${when}: ${count} ${count === 1 ? 'visit' : 'visits'}`;
    bar.append(tip);
    chart.append(bar);
  });
  chart.append(svg('line', { class: 'axis', x1: pad.left, x2: width - pad.right, y1: base, y2: base }));
  text(pad.left - 4, pad.top + 8, String(max), 'end', 'value');
  text(pad.left - 4, base, '0', 'end', 'value');
  marks.forEach(([position, words], n) => {
    const anchor = n === 0 ? 'start' : n === marks.length - 1 ? 'end' : 'middle';
    const at = n === 0 ? pad.left : n === marks.length - 1 ? width - pad.right : x(position);
    text(at, height - 6, words, anchor, 'tick');
  });
  return chart;
}
