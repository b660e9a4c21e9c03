// The graphs over time (outstanding heap, committed bytes, RSS) drawn with
// uPlot, and the drag-to-select window they share: dragging on any graph
// selects [t1, t2) on all of them and tells the page.

import uPlot from 'uplot';
import { fmtBytes, fmtSeconds } from './format.js';

// Axis steps in powers of two of the byte units, so ticks read 8 MiB, 16 MiB, ...
const BYTE_INCRS = [];
for (let u = 1; u <= 1024 ** 4; u *= 1024) for (let m = 1; m < 1024; m *= 2) BYTE_INCRS.push(u * m);

const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];
const GREY = '#7f7f7f'; // the processes summed beyond the top ones

// A series' color: its index in the palette, or grey for a negative index.
export const colorOf = (i) => (i < 0 ? GREY : PALETTE[i % PALETTE.length]);

/*
 * Draws one chart per entry of specs ({ title, series: [{ label, values }] })
 * into el. Time is in seconds on the x axis; each value is the largest in its
 * bucket, so a spike shorter than a bucket still shows. onSelect(t1ns, t2ns)
 * is called when the user drags a range; returns { charts, select, clear }.
 */
export function drawCharts(el, series, specs, durationNs, onSelect) {
	const n = series.count;
	const w = series.bucket_ns;
	const xs = new Float64Array(n + 1);
	for (let i = 0; i <= n; i++) xs[i] = Math.min(i * w, durationNs) / 1e9;
	const span = durationNs / 1e9;
	const charts = [];
	let syncing = false;
	// Spans highlighted on a chart by id ([t1, t2] in ns), drawn over the series.
	const marks = new Map();

	const drawMarks = (u) => {
		const list = marks.get(u.htId);
		if (!list || !list.length) return;
		const ctx = u.ctx;
		const { top, height, left, width } = u.bbox;
		ctx.save();
		ctx.fillStyle = 'rgba(30, 100, 230, 0.35)';
		for (const [a, b] of list) {
			const x1 = Math.max(left, u.valToPos(a / 1e9, 'x', true));
			const x2 = Math.min(left + width, u.valToPos(b / 1e9, 'x', true));
			// At least two device pixels, so a 10 ms buffer in a minute-long trace shows.
			ctx.fillRect(x1, top, Math.max(x2 - x1, 2), height);
		}
		ctx.restore();
	};

	const selectAll = (t1, t2, from) => {
		syncing = true;
		for (const c of charts) {
			if (c === from) continue;
			const l = c.valToPos(t1 / 1e9, 'x');
			const r = c.valToPos(t2 / 1e9, 'x');
			c.setSelect({ left: l, width: Math.max(r - l, 1), top: 0, height: c.over.clientHeight }, false);
		}
		syncing = false;
	};

	for (const spec of specs) {
		if (!spec.series.length) continue;
		const box = document.createElement('div');
		box.className = 'chart';
		box.dataset.chart = spec.id;
		el.appendChild(box);
		// The last bucket repeats so the step line reaches the trace's end.
		const data = [xs, ...spec.series.map((s) => {
			const v = Array.from(s.values);
			v.push(v.length ? v[v.length - 1] : null);
			return v;
		})];
		const opts = {
			title: spec.title,
			width: Math.max(el.clientWidth - 4, 400),
			height: 200,
			scales: { x: { time: false, range: [0, span] } },
			axes: [
				{ values: (u, vals) => vals.map((v) => fmtSeconds(v, span)) },
				{ values: (u, vals) => vals.map((v) => fmtBytes(v)), size: 80, incrs: BYTE_INCRS },
			],
			series: [
				{ label: 'time', value: (u, v) => (v === null || v === undefined ? '' : fmtSeconds(v, span)) },
				...spec.series.map((s, i) => ({
					label: s.label,
					stroke: colorOf(s.color ?? i),
					fill: colorOf(s.color ?? i) + '22',
					width: 1.5,
					paths: uPlot.paths.stepped({ align: 1 }),
					value: (u, v) => (v === null || v === undefined ? '' : fmtBytes(v)),
				})),
			],
			cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: 'heaptrail' } },
			hooks: {
				draw: [drawMarks],
				setSelect: [
					(u) => {
						if (syncing || u.select.width < 2) return;
						const t1 = Math.max(0, Math.round(u.posToVal(u.select.left, 'x') * 1e9));
						const t2 = Math.min(durationNs + 1, Math.round(u.posToVal(u.select.left + u.select.width, 'x') * 1e9));
						if (t2 <= t1) return;
						selectAll(t1, t2, u);
						onSelect(t1, t2);
					},
				],
			},
		};
		const u = new uPlot(opts, data, box);
		u.htId = spec.id;
		charts.push(u);
	}

	window.addEventListener('resize', () => {
		for (const c of charts) c.setSize({ width: Math.max(el.clientWidth - 4, 400), height: 200 });
	});

	return {
		charts,
		select: (t1, t2) => selectAll(t1, t2, null),
		// Highlights spans on the chart with that id (an empty list clears).
		highlight: (id, list) => {
			marks.set(id, list);
			for (const c of charts) if (c.htId === id) c.redraw(false);
		},
		clear: () => {
			syncing = true;
			for (const c of charts) c.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
			syncing = false;
		},
	};
}
