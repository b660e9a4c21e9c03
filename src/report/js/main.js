// Entry point of the report page: reads the data embedded in the HTML file,
// draws the summary and the graphs, and recomputes the tables, the flame
// graph and the xperf view whenever the selected window changes.

import 'uplot/dist/uPlot.min.css';
import 'tabulator-tables/dist/css/tabulator_simple.min.css';
import '../css/report.css';

import { loadModel, processLabel, heapLabel } from './model.js';
import { windowSites, momentSites, windowTotals, buildTree, flameTree, xperfRows, spans, METRICS, SORT_KEYS } from './window.js';
import { drawCharts, colorOf } from './charts.js';
import { createTreeTable, createXperfTable } from './tables.js';
import { createFlame } from './flame.js';
import { windowStacks, collapsedText, csvText, chartsSvg, saveText } from './download.js';
import { summary } from './summary.js';
import { fmtBytes, fmtCount, fmtTime, rangeArg } from './format.js';

const $ = (id) => document.getElementById(id);

function readData() {
	const el = $('heaptrail-data');
	if (!el) throw new Error('the report has no data');
	return JSON.parse(el.textContent);
}

function chartSpecs(m) {
	const s = m.series;
	// The process heap is glibc's malloc; custom heaps (heap.h) show their names.
	const handle = (p, h) => heapLabel(m, p, h);
	const seriesLabel = (x, what) => (x.process < 0 ? x.others + ' other processes (summed)' : processLabel(m, x.process) + what);
	const seriesColor = (x, extra) => (x.process < 0 ? -1 : x.process + extra);
	return [
		// One color per process on every graph; further heaps of a process get
		// their own; the sum of the processes beyond the top ones is grey.
		{ id: 'heap', title: 'Outstanding heap bytes', series: s.heap.map((x) => ({ label: seriesLabel(x, ' ' + handle(x.process, x.handle)), values: x.max, color: seriesColor(x, 3 * x.handle) })) },
		{ id: 'commit', title: 'Committed bytes (mappings)', series: s.commit.map((x) => ({ label: seriesLabel(x, ''), values: x.max, color: seriesColor(x, 0) })) },
		{ id: 'rss', title: 'Resident set size (RSS)', series: s.rss.map((x) => ({ label: seriesLabel(x, ''), values: x.max, color: seriesColor(x, 0) })) },
	];
}

function main() {
	let m;
	try {
		m = loadModel(readData());
	} catch (e) {
		$('fatal').textContent = 'cannot show this report: ' + e.message;
		return;
	}
	summary(m);
	const labels = { process: (p) => processLabel(m, p), handle: (h, p) => heapLabel(m, p, h) + ' (handle ' + m.handles[h] + ')' };
	// The commands that give the page's numbers: of its snapshot when that is
	// not the last (the commands' default).
	const snaps = m.trace.snapshots || [];
	const snapArg = m.trace.snapshot && snaps.length && m.trace.snapshot !== snaps[snaps.length - 1].number ? ' --snapshot ' + m.trace.snapshot : '';
	const file = (m.trace.file || 'TRACE.htr') + snapArg;
	const state = { t1: m.fullWindow[0], t2: m.fullWindow[1], heap: null, commit: null };
	// The peaks (info's: when the summed outstanding bytes were first highest)
	// and the sites live then, for "live at the peak" in the flame graph and
	// the xperf view; computed once.
	const peakNs = { heap: m.totals.heap_peak_ns || 0, commit: m.totals.commit_peak_ns || 0 };
	let atPeak = null;
	const peakSites = (src) => {
		if (!atPeak) atPeak = { heap: momentSites(m.heap, peakNs.heap), commit: momentSites(m.commit, peakNs.commit) };
		return atPeak[src];
	};
	// Whether the user chose the view's metric; until then it follows the window:
	// live at the peak for the whole trace, the window's own numbers otherwise.
	const chosen = { flame: false, xperf: false, icicle: false };

	// The source selectors: every heap together, each heap by its name when
	// there are several (malloc, heap.h's names), and committed memory.
	const heapHandles = [...new Set(m.heap.sites.handle)].sort((a, b) => a - b);
	for (const id of ['flame-source', 'xperf-source']) {
		const opts = [['heap', heapHandles.length > 1 ? 'heap: all heaps' : 'heap: ' + (heapHandles.length ? heapLabel(m, -1, heapHandles[0]) : 'malloc')]];
		if (heapHandles.length > 1) for (const h of heapHandles) opts.push(['heap:' + h, 'heap: ' + heapLabel(m, -1, h)]);
		opts.push(['commit', 'committed']);
		const sel = $(id);
		sel.textContent = '';
		for (const [v, t] of opts) sel.appendChild(new Option(t, v));
	}
	// A source as { tab, kind, keep }: keep picks one heap's sites.
	const source = (v) => {
		if (v === 'commit') return { tab: m.commit, kind: 'commit', keep: null };
		const h = v.startsWith('heap:') ? +v.slice(5) : -1;
		return { tab: m.heap, kind: 'heap', keep: h < 0 ? null : (s) => m.heap.sites.handle[s] === h };
	};

	let charts = null;
	// A picked row's blocks are highlighted on its graph; a new window clears them.
	const pick = (kind) => (row) => {
		const tab = kind === 'commit' ? m.commit : m.heap;
		const ws = kind === 'commit' ? state.commit : state.heap;
		const list = row.kind === 'block' ? [[row.alloc, Math.min(row.free, m.trace.duration_ns)]] : spans(tab, ws, row.sk || [], m.trace.duration_ns);
		charts.highlight(kind, list);
		state.highlighted = { kind, spans: list.length };
	};
	const heapTable = createTreeTable($('heap-table'), 'heap', 'Process / Handle / Impacting Type / Stack', pick('heap'));
	const commitTable = createTreeTable($('commit-table'), 'commit', 'Process / Impacting Type / Commit Stack', pick('commit'));
	const xperf = createXperfTable($('xperf-table'));
	const flame = createFlame($('flame-box'), $('flame'), $('flame-details'));

	function heapLevels() {
		return $('split-type').checked ? ['process', 'handle', 'impacting', 'type', 'stack'] : ['process', 'handle', 'impacting', 'stack'];
	}
	function commitLevels() {
		return $('split-type').checked ? ['process', 'impacting', 'type', 'stack'] : ['process', 'impacting', 'stack'];
	}

	function drawTables() {
		heapTable.update(buildTree(m, m.heap, state.heap, heapLevels(), labels));
		commitTable.update(buildTree(m, m.commit, state.commit, commitLevels(), labels));
	}

	function drawFlame() {
		const src = source($('flame-source').value);
		const metric = $('flame-metric').value;
		const ws = metric === 'peak' ? peakSites(src.kind) : state[src.kind];
		const fn = METRICS[metric === 'peak' ? 'outstanding' : metric];
		const tree = flameTree(m, src.tab, ws, fn, $('flame-callees').checked, src.keep);
		// Deep stacks (an interpreter's) open as an icicle, root on top, until
		// the user picks an orientation.
		if (!chosen.icicle) $('flame-icicle').checked = flame.deep(tree);
		flame.update(tree, metric !== 'count', $('flame-icicle').checked);
	}

	function drawXperf() {
		const src = source($('xperf-source').value);
		const by = $('xperf-by').value;
		const key = $('xperf-sort').value;
		const top = Math.max(1, parseInt($('xperf-top').value, 10) || 50);
		const peak = $('xperf-when').value === 'peak';
		const ws = peak ? peakSites(src.kind) : state[src.kind];
		const rows = xperfRows(m, src.tab, ws, by, peak, src.keep).sort((a, b) => b[key] - a[key] || b.st - a.st).slice(0, top);
		for (const r of rows) {
			r.label = r.name;
			r.kind = by === 'stacks' ? 'stack' : by === 'frames' ? 'frame' : 'image';
			if (by === 'stacks') {
				// xperf prints a stack's frames innermost first.
				const frames = (m.stacks[r.stack] || []).slice().reverse();
				r._children = frames.map((f) => ({ label: m.frames.names[f], where: m.frames.where[f], kind: 'frame' }));
			}
		}
		xperf.update(rows);
		const when = peak ? ' --at-peak' : ' -range ' + rangeArg(state.t1) + ' ' + rangeArg(state.t2);
		$('xperf-cmd').textContent = src.kind === 'commit' && peak
			? 'committed memory live at its peak (' + fmtTime(peakNs.commit) + ')'
			: 'heaptrail analyze ' + file + ' -' + by + ' ' + key + when + ' -top ' + top + (src.keep ? ' (every heap: analyze has no heap filter)' : '');
	}

	function setWindow(t1, t2) {
		if (charts) {
			charts.highlight('heap', []);
			charts.highlight('commit', []);
		}
		state.t1 = t1;
		state.t2 = t2;
		state.heap = windowSites(m.heap, t1, t2);
		state.commit = windowSites(m.commit, t1, t2);
		const full = t1 <= 0 && t2 > m.trace.duration_ns;
		if (!chosen.flame) $('flame-metric').value = full ? 'peak' : 'outstanding';
		if (!chosen.xperf) $('xperf-when').value = full ? 'peak' : 'window';
		const h = windowTotals(state.heap);
		const c = windowTotals(state.commit);
		$('win-from').value = (t1 / 1e9).toFixed(9).replace(/\.?0+$/, '');
		$('win-to').value = (Math.min(t2, m.trace.duration_ns) / 1e9).toFixed(9).replace(/\.?0+$/, '');
		$('win-label').textContent = full
			? 'whole trace (' + fmtTime(m.trace.duration_ns) + ')'
			: fmtTime(t1) + ' to ' + fmtTime(t2) + ' (' + fmtTime(t2 - t1) + ')';
		$('win-stats').textContent =
			'heap: ' + fmtCount(h.count) + ' allocated, ' + fmtBytes(h.size) + ', impacting ' + fmtBytes(h.impacting) +
			'; committed: ' + fmtCount(c.count) + ', ' + fmtBytes(c.size) + ', impacting ' + fmtBytes(c.impacting);
		history.replaceState(null, '', full ? location.pathname : '#window=' + rangeArg(t1) + '-' + rangeArg(t2));
		$('win-cmd').textContent = full
			? 'heaptrail table heap ' + file
			: 'heaptrail table heap|commit ' + file + ' --range ' + rangeArg(t1) + ' ' + rangeArg(t2);
		state.stacks = null;
		// The tables first; the flame graph and the xperf view right after, so
		// a big window shows its tables without waiting for the rest. How long
		// each part took is kept for whoever profiles a big report.
		const p0 = performance.now();
		drawTables();
		state.timings = { tables: performance.now() - p0 };
		clearTimeout(state.later);
		state.later = setTimeout(() => {
			const p1 = performance.now();
			drawFlame();
			const p2 = performance.now();
			drawXperf();
			const p3 = performance.now();
			// The commands that write the downloads' files (-top: the window's stacks).
			const range = ' -range ' + rangeArg(t1) + ' ' + rangeArg(t2);
			$('dl-cmd').textContent =
				'heaptrail export ' + file + ' --format collapsed' + range + ' -o ' + downloadName('folded') +
				'; heaptrail analyze ' + file + ' -stacks' + range + ' -top ' + windowRows().length + ' --format csv' +
				// Binned cells do not keep which blocks their process held at exit.
				(m.heap.binned ? ' (not byte for byte here: in binned sites, blocks held at exit count as freed then)' : '');
			Object.assign(state.timings, { flame: p2 - p1, xperf: p3 - p2, downloads: performance.now() - p3 });
		}, 0);
	}

	// The downloads: the window's heap stacks as 'heaptrail export --format
	// collapsed' and 'heaptrail analyze -stacks --format csv' write them for
	// -range T1 T2, and the graphs as SVG.
	const base = (m.trace.file || 'TRACE.htr').replace(/^.*\//, '').replace(/\.htr$/, '');
	function downloadName(ext) {
		const full = state.t1 <= 0 && state.t2 > m.trace.duration_ns;
		return base + (full ? '' : '-' + rangeArg(state.t1) + '-' + rangeArg(state.t2)) + '.' + ext;
	}
	function windowRows() {
		if (!state.stacks) state.stacks = windowStacks(m, state.t1, state.t2);
		return state.stacks;
	}
	$('dl-collapsed').addEventListener('click', () => saveText(downloadName('folded'), collapsedText(m, windowRows()), 'text/plain'));
	$('dl-csv').addEventListener('click', () => saveText(downloadName('csv'), csvText(windowRows()), 'text/csv'));
	$('dl-svg').addEventListener('click', () =>
		saveText(downloadName('svg'), chartsSvg(chartSpecs(m), m.series, m.trace.duration_ns, state.t1, state.t2, colorOf), 'image/svg+xml'));

	charts = drawCharts($('charts'), m.series, chartSpecs(m), m.trace.duration_ns, (t1, t2) => setWindow(t1, t2));

	$('win-reset').addEventListener('click', () => {
		charts.clear();
		setWindow(m.fullWindow[0], m.fullWindow[1]);
	});
	// A window around the heap's peak: a fortieth of the trace on each side.
	$('win-peak').addEventListener('click', () => {
		const d = m.trace.duration_ns;
		const half = Math.max(1000, Math.round(d / 40));
		const a = Math.max(0, peakNs.heap - half);
		const b = Math.min(d + 1, peakNs.heap + half + 1);
		charts.select(a, b);
		setWindow(a, b);
	});
	$('win-apply').addEventListener('click', () => {
		const a = Math.round(parseFloat($('win-from').value) * 1e9);
		const b = Math.round(parseFloat($('win-to').value) * 1e9);
		if (!(a >= 0) || !(b > a)) {
			$('win-stats').textContent = 'the window needs 0 <= from < to (seconds)';
			return;
		}
		charts.select(a, b);
		setWindow(a, b);
	});
	$('split-type').addEventListener('change', drawTables);
	for (const id of ['flame-source', 'flame-metric', 'flame-callees']) $(id).addEventListener('change', drawFlame);
	$('flame-metric').addEventListener('change', () => (chosen.flame = true));
	$('xperf-when').addEventListener('change', () => (chosen.xperf = true));
	$('flame-icicle').addEventListener('change', () => {
		chosen.icicle = true;
		flame.setInverted($('flame-icicle').checked);
	});
	$('flame-search').addEventListener('input', () => flame.search($('flame-search').value));
	for (const id of ['xperf-source', 'xperf-when', 'xperf-by', 'xperf-sort', 'xperf-top']) $(id).addEventListener('change', drawXperf);
	$('xperf-sort').innerHTML = Object.entries(SORT_KEYS).map(([k, v]) => '<option value="' + k + '">' + k + ' (' + v + ')</option>').join('');

	// A window in the address (#window=T1ns-T2ns) opens with it, so a link to the
	// attached report can point at the spike it is about.
	const fromHash = /^#window=(\d+)ns-(\d+)ns$/.exec(location.hash);
	if (fromHash && +fromHash[2] > +fromHash[1]) {
		charts.select(+fromHash[1], +fromHash[2]);
		setWindow(+fromHash[1], +fromHash[2]);
	} else {
		setWindow(m.fullWindow[0], m.fullWindow[1]);
	}
	// For tests and for the curious: the model and the window in the console.
	window.heaptrail = {
		model: m,
		charts: charts.charts,
		state,
		setWindow,
		select: charts.select,
		totals: () => ({ heap: windowTotals(state.heap), commit: windowTotals(state.commit) }),
		peakNs,
		peakTotals: () => ({ heap: windowTotals(peakSites('heap')), commit: windowTotals(peakSites('commit')) }),
	};
	document.body.dataset.ready = '1';
}

main();
