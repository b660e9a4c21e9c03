// End to end: records examples/memtestapp for 3 s, writes its report, opens
// it in headless chromium and does the seed's investigation (002): select
// the window over the last four spikes, see 4 transient commits of 40 MB in
// all, expand the stack down to ManipulateTemporaryBuffer. The page's numbers
// are checked against 'heaptrail table --range' for the same window.
//
//   node e2e.test.mjs --heaptrail BIN --memtestapp BIN --modules DIR --artifacts DIR

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, statSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage, check, dragWindow, rowCells, visibleLabels, expandRow, download, parseSvg, flameBoxes } from './browser.mjs';

const args = process.argv.slice(2);
const opt = (n) => args[args.indexOf(n) + 1];
const heaptrail = opt('--heaptrail');
const memtestapp = opt('--memtestapp');
const modules = opt('--modules');
const artifacts = opt('--artifacts');
const MB = 1024 * 1024;

function run(cmd, argv) {
	const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 120000 });
	if (r.status !== 0) throw new Error(cmd + ' ' + argv.join(' ') + ' failed (' + r.status + '): ' + r.stderr);
	return r.stdout;
}

// The totals of 'heaptrail table KIND --range' in JSON.
function tableTotals(kind, file, t1, t2) {
	const j = JSON.parse(run(heaptrail, ['table', kind, file, '--range', t1 + 'ns', t2 + 'ns', '--format', 'json']));
	return { count: j.total.count, size: j.total.size, impacting: j.total.impacting_size };
}

let durationNs = 0;
const info0Duration = () => durationNs;

const tmp = mkdtempSync(join(tmpdir(), 'heaptrail-report-e2e-'));
let browser = null;
try {
	const trace = join(tmp, 'memtest.htr');
	const html = join(tmp, 'memtest.html');
	run(heaptrail, ['record', '-o', trace, '--', memtestapp, '--seconds', '3']);
	const out = run(heaptrail, ['report', trace, '-o', html]);
	check(existsSync(html) && statSync(html).size > 100000, 'heaptrail report wrote ' + html + ': ' + out.trim());

	browser = await openPage(modules, html);
	const { page } = browser;
	durationNs = await page.evaluate(() => window.heaptrail.model.trace.duration_ns);

	// The graphs are drawn: three charts, each with a canvas that has ink on it.
	const ink = await page.evaluate(() =>
		window.heaptrail.charts.map((u) => {
			const c = u.ctx.canvas;
			const d = u.ctx.getImageData(0, 0, c.width, c.height).data;
			let n = 0;
			for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 200 || d[i + 2] < 200)) n++;
			return n;
		}));
	check(ink.length === 3 && ink.every((n) => n > 500), 'three graphs are drawn (pixels: ' + ink.join(', ') + ')');

	// The process heap is "malloc" in the heap graph's legend and the selectors.
	const pid = JSON.parse(run(heaptrail, ['info', trace, '--format', 'json'])).processes[0].pid;
	const names = await page.evaluate(() => ({
		legend: window.heaptrail.charts[0].series.slice(1).map((s) => s.label),
		flame: [...document.querySelectorAll('#flame-source option')].map((o) => o.textContent),
		xperf: [...document.querySelectorAll('#xperf-source option')].map((o) => o.textContent),
	}));
	check(JSON.stringify(names.legend) === JSON.stringify(['memtestapp (' + pid + ') malloc']), 'heap graph legend: ' + JSON.stringify(names.legend));
	check(JSON.stringify(names.flame) === '["heap: malloc","committed"]' && JSON.stringify(names.xperf) === JSON.stringify(names.flame),
		'flame graph and xperf selectors name the heap malloc: ' + JSON.stringify(names));

	// Downloads of the whole trace: 'heaptrail export --format collapsed' and
	// 'heaptrail analyze -stacks --format csv' for the same -range, to the byte
	// (blocks the program never freed count as outstanding, as analyze counts them).
	const durRange = ['-range', '0ns', durationNs + 1 + 'ns'];
	let got = await download(page, 'dl-collapsed');
	let want = run(heaptrail, ['export', trace, '--format', 'collapsed', ...durRange, '-o', '-']);
	check(got.name === 'memtest.folded' && want.length > 0 && got.text === want,
		'whole trace: collapsed download = heaptrail export --format collapsed (' + got.name + ', ' + got.text.length + ' vs ' + want.length + ' bytes)');
	got = await download(page, 'dl-csv');
	want = run(heaptrail, ['analyze', trace, '-stacks', ...durRange, '-top', '1000000', '--format', 'csv']);
	check(got.name === 'memtest.csv' && got.text === want,
		'whole trace: CSV download = heaptrail analyze -stacks --format csv (' + got.text.length + ' vs ' + want.length + ' bytes)');
	const cmd = await page.textContent('#dl-cmd');
	check(cmd.includes(' --format collapsed -range 0ns ' + (durationNs + 1) + 'ns -o memtest.folded') && cmd.includes(' -stacks -range 0ns ' + (durationNs + 1) + 'ns -top '),
		'the page prints the export command of its download (' + cmd + ')');

	// The flame graph: a box of fixed height with its own scroll; memtestapp's
	// stacks are shallow, so it opens as a flame (root at the bottom); boxes
	// show the function, the tooltip the whole frame with module and file:line.
	await page.waitForSelector('#flame svg g.frame', { timeout: 20000 });
	await page.waitForTimeout(600); // d3-flame-graph's 250 ms transition
	const fb = await flameBoxes(page);
	check(fb.clientHeight === 480 && fb.overflowY === 'auto', 'flame graph box: 480 px with its own scroll (' + fb.clientHeight + ', ' + fb.overflowY + ')');
	const root = fb.boxes.find((b) => b.label === 'all');
	check(!fb.icicle && root && root.y === Math.max(...fb.boxes.map((b) => b.y)), 'shallow stacks open as a flame: root at the bottom (icicle ' + fb.icicle + ')');
	const mtb = fb.boxes.find((b) => b.title.startsWith('memtestapp!InnerLoopOperation'));
	check(mtb && /^InnerLoopOperation\(/.test(mtb.label) && /\(memtestapp\.cpp:\d+\): [\d.]+ (B|[KMG]iB) \([\d.]+%\)$/.test(mtb.title),
		'a box shows its function, its tooltip the module and file:line (' + JSON.stringify(mtb) + ')');
	check(!fb.boxes.some((b) => b.label.includes('!')), 'no box label carries a module prefix (' + fb.boxes.filter((b) => b.label.includes('!')).map((b) => b.label).join(', ') + ')');

	// The whole trace opens on what was live at the heap's peak, in the flame
	// graph and the xperf view, with the numbers of 'analyze --at-peak'.
	const atPeak = JSON.parse(run(heaptrail, ['analyze', trace, '-stacks', '--at-peak', '--format', 'json']));
	const peakInfo = JSON.parse(run(heaptrail, ['info', trace, '--format', 'json'])).totals;
	const pv = await page.evaluate(() => ({
		flame: document.getElementById('flame-metric').value,
		xperf: document.getElementById('xperf-when').value,
		peakNs: window.heaptrail.peakNs.heap,
		live: window.heaptrail.peakTotals().heap.outstanding,
	}));
	check(pv.flame === 'peak' && pv.xperf === 'peak', 'whole trace: flame graph and xperf view default to live at the peak (' + JSON.stringify(pv) + ')');
	check(pv.peakNs === peakInfo.peak_time_ns, 'the peak is info\'s peak time (' + pv.peakNs + ' vs ' + peakInfo.peak_time_ns + ')');
	check(pv.live === atPeak.totals.outstanding_bytes && pv.live === peakInfo.peak_bytes,
		'live at the peak in the page = analyze --at-peak = info peak_bytes (' + pv.live + ', ' + atPeak.totals.outstanding_bytes + ', ' + peakInfo.peak_bytes + ')');
	await page.waitForFunction(() => /--at-peak/.test(document.getElementById('xperf-cmd').textContent), null, { timeout: 20000 });
	const xso = await page.evaluate(() => {
		const cells = [...document.querySelectorAll('#xperf-table .tabulator-row')].map((r) => r.querySelector('.lbl')?.textContent || '');
		return cells[0] || '';
	});
	const topPeak = atPeak.items[0].stack[0];
	check(xso.startsWith(topPeak), 'xperf view at the peak: top stack is analyze --at-peak\'s (' + xso + ' vs ' + topPeak + ')');
	await page.waitForSelector('#flame svg rect', { timeout: 20000 });
	// Jump to peak selects a window around it; the views follow the window again.
	await page.click('#win-peak');
	const jp = await page.evaluate(() => ({ t1: window.heaptrail.state.t1, t2: window.heaptrail.state.t2, flame: document.getElementById('flame-metric').value, xperf: document.getElementById('xperf-when').value }));
	check(jp.t1 <= pv.peakNs && pv.peakNs < jp.t2 && jp.t2 - jp.t1 < info0Duration(), 'jump to peak: a window around the peak (' + JSON.stringify(jp) + ')');
	check(jp.flame === 'outstanding' && jp.xperf === 'window', 'in a window the views show the window (' + JSON.stringify(jp) + ')');
	// Back to the whole trace (and its default view) for the investigation below.
	await page.click('#win-reset');
	const back = await page.evaluate(() => document.getElementById('flame-metric').value);
	check(back === 'peak', 'Reset: the whole trace shows live at the peak again (' + back + ')');

	// The ten spikes, from the data: commits whose stack has ManipulateTemporaryBuffer.
	const info = await page.evaluate(() => {
		const m = window.heaptrail.model;
		const t = m.commit;
		const spikes = [];
		const steady = [];
		const big = [];
		for (let i = 0; i < t.items.exactCount; i++) {
			const frames = m.stacks[t.sites.stack[t.items.site[i]]] || [];
			const names = frames.map((f) => m.frames.names[f]).join(' ');
			const rec = { a: t.items.alloc[i], f: t.items.free[i], size: t.items.bytes[i] };
			if (names.includes('ManipulateTemporaryBuffer')) spikes.push(rec);
			else if (rec.size === 10 * 1024 * 1024) steady.push(rec);
			// Every big piece, with its site, to say what went wrong if a count does not hold.
			if (rec.size >= 1024 * 1024) big.push({ ...rec, stack: names || '(no stack)', site: t.items.site[i] });
		}
		spikes.sort((x, y) => x.a - y.a);
		return { spikes, steady, big, duration: m.trace.duration_ns };
	});
	const bigText = ' (pieces of 1 MiB and more: ' + JSON.stringify(info.big) + ')';
	check(info.spikes.length === 10 && info.spikes.every((s) => s.size === 10 * MB), '10 spikes of 10 MB in the data' + (info.spikes.length === 10 ? '' : bigText));
	check(info.steady.length === 2, 'two steady 10 MB mappings in the data' + (info.steady.length === 2 ? '' : bigText));
	const sp = info.spikes;
	const want1 = (sp[5].f + sp[6].a) / 2;
	// 40 ms after the last spike's end: on a loaded machine the run's last
	// ticks come late and close together, so the steady mappings' munmap can
	// follow that end by less than a pixel of the graph; the window may hold
	// it (their Size is 0 in the window either way: made before it).
	const want2 = Math.min(sp[9].f + 40e6, info.duration);

	// Drag on the committed-bytes graph over the last four spikes.
	const [t1, t2] = await dragWindow(page, 1, want1, want2);
	check(t1 > sp[5].f && t1 < sp[6].a && t2 > sp[9].f,
		'the dragged window [' + t1 + ', ' + t2 + ') holds exactly the last four spikes (spikes ' +
		JSON.stringify(sp.slice(5).map((s) => [s.a, s.f])) + ')');

	const transient = await rowCells(page, 'commit-table', 'Transient');
	check(transient && transient.count === '4', 'commit table: Transient Count 4 (got ' + JSON.stringify(transient) + ')');
	check(transient.size === '40 MiB', 'commit table: Transient Size 40 MiB');
	check(transient.impacting === '0 B', 'commit table: Transient Impacting Size 0 B');

	// The downloads of the window equal the commands for the same -range, and
	// the graphs come as one well-formed SVG with the window shaded.
	const winRange = ['-range', t1 + 'ns', t2 + 'ns'];
	got = await download(page, 'dl-collapsed');
	want = run(heaptrail, ['export', trace, '--format', 'collapsed', ...winRange, '-o', '-']);
	check(got.name === 'memtest-' + t1 + 'ns-' + t2 + 'ns.folded' && want.length > 0 && got.text === want,
		'window: collapsed download = heaptrail export --format collapsed ' + winRange.join(' ') + ' (' + got.text.length + ' bytes)');
	got = await download(page, 'dl-csv');
	want = run(heaptrail, ['analyze', trace, '-stacks', ...winRange, '-top', '1000000', '--format', 'csv']);
	check(got.text === want && want.split('\n').length > 2, 'window: CSV download = heaptrail analyze -stacks --format csv (' + (want.split('\n').length - 2) + ' stacks)');
	got = await download(page, 'dl-svg');
	const svg = await parseSvg(page, got.text);
	const nseries = await page.evaluate(() => window.heaptrail.charts.reduce((n, u) => n + u.series.length - 1, 0));
	check(svg.ok && svg.root === 'svg http://www.w3.org/2000/svg' && svg.charts.join() === 'heap,commit,rss' && svg.series === nseries && svg.windows === 3 &&
		svg.legends[0] === 'memtestapp (' + pid + ') malloc', 'graphs download: well-formed SVG, 3 graphs, ' + nseries + ' series, the window shaded (' + JSON.stringify(svg) + ')');

	// The same numbers as heaptrail table for that window, heap and commit.
	const page_tot = await page.evaluate(() => window.heaptrail.totals());
	for (const kind of ['commit', 'heap']) {
		const tt = tableTotals(kind, trace, t1, t2);
		const pt = page_tot[kind];
		check(pt.count === tt.count && pt.size === tt.size && pt.impacting === tt.impacting,
			kind + ' window totals equal heaptrail table --range: ' + JSON.stringify(tt) + ' vs page ' +
			JSON.stringify({ count: pt.count, size: pt.size, impacting: pt.impacting }));
	}

	// Expand Transient and its stack down to the allocation site.
	await page.evaluate(() => {
		for (const row of document.querySelectorAll('#commit-table .tabulator-row'))
			if (row.querySelector('.lbl')?.textContent.trim() === 'Transient')
				row.querySelector('.tabulator-data-tree-control')?.click();
	});
	for (let k = 0; k < 20; k++) {
		const clicked = await page.evaluate(() => {
			for (const row of document.querySelectorAll('#commit-table .tabulator-row')) {
				if (!row.querySelector('.lbl-frame')) continue;
				const ctl = row.querySelector('.tabulator-data-tree-control');
				if (ctl && ctl.querySelector('.tabulator-data-tree-control-expand')) {
					ctl.click();
					return true;
				}
			}
			return false;
		});
		if (!clicked) break;
	}
	const labels = await visibleLabels(page, 'commit-table');
	const iMain = labels.indexOf('memtestapp!main');
	const iOp = labels.findIndex((l) => l.startsWith('memtestapp!Operation1'));
	const iMtb = labels.findIndex((l) => l.startsWith('memtestapp!ManipulateTemporaryBuffer'));
	check(iMain >= 0 && iOp === iMain + 1 && iMtb === iOp + 1,
		'the stack expands main -> Operation1 -> ManipulateTemporaryBuffer (rows: ' + labels.join(' | ') + ')');
	const where = await page.evaluate(() => {
		for (const row of document.querySelectorAll('#commit-table .tabulator-row'))
			if (row.querySelector('.lbl')?.textContent.startsWith('memtestapp!ManipulateTemporaryBuffer'))
				return row.querySelector('.where')?.textContent || '';
		return '';
	});
	check(/^memtestapp\.cpp:\d+$/.test(where), 'the frame shows its file:line (' + where + ')');
	const blocks = await page.evaluate(() => document.querySelectorAll('#commit-table .lbl-block').length);
	check(blocks === 4, 'the four transient buffers are listed as blocks under the stack (' + blocks + ')');

	// Typing the window and Apply recomputes it the same, and keeps what was expanded.
	await page.fill('#win-from', String(t1 / 1e9));
	await page.fill('#win-to', String(t2 / 1e9));
	await page.click('#win-apply');
	const again = await page.evaluate(() => [window.heaptrail.state.t1, window.heaptrail.state.t2]);
	check(Math.abs(again[0] - t1) <= 1 && Math.abs(again[1] - t2) <= 1, 'Apply sets the typed window (' + again.join(', ') + ')');
	const kept = await visibleLabels(page, 'commit-table');
	check(kept.some((l) => l.startsWith('memtestapp!ManipulateTemporaryBuffer')) && (await rowCells(page, 'commit-table', 'Transient')).count === '4',
		'after Apply the stack stays expanded and Transient still counts 4');

	// Clicking Transient highlights its four buffers on the committed graph.
	await page.click('#commit-table .lbl-impacting >> text=Transient');
	const hl = await page.evaluate(() => window.heaptrail.state.highlighted);
	check(hl && hl.kind === 'commit' && hl.spans === 4, 'clicking Transient highlights 4 spans on the committed graph (' + JSON.stringify(hl) + ')');

	// The Size column sorts the tree: ascending puts Impacting (0 B) above Transient.
	const order = async () => (await visibleLabels(page, 'commit-table')).filter((l) => l === 'Transient' || l === 'Impacting');
	check((await order()).join() === 'Transient,Impacting', 'sorted by Size, largest first: Transient above Impacting');
	await page.click('#commit-table .tabulator-col[tabulator-field="size"] .tabulator-col-title');
	const first = (await order()).join();
	if (first !== 'Impacting,Transient') await page.click('#commit-table .tabulator-col[tabulator-field="size"] .tabulator-col-title');
	check((await order()).join() === 'Impacting,Transient', 'a click on Size sorts the children ascending: Impacting above Transient');
	await page.click('#commit-table .tabulator-col[tabulator-field="size"] .tabulator-col-title');

	// The window is in the address: the same report opened with it shows the same window.
	const hash = await page.evaluate(() => location.hash);
	check(hash === '#window=' + t1 + 'ns-' + t2 + 'ns', 'the address holds the window (' + hash + ')');

	// The flame graph of what was committed in the window is drawn and
	// searchable. Not the heap's blocks outstanding at the window's end (the
	// default): on a loaded machine the program's last ticks catch up, its
	// exit can fall within the window's last 40 ms, and its blocks end there,
	// so that flame graph has nothing to show (its rects never came: qa).
	await page.selectOption('#flame-source', 'commit');
	await page.selectOption('#flame-metric', 'size');
	await page.waitForSelector('#flame svg rect', { timeout: 20000 });
	const rects = await page.evaluate(() => document.querySelectorAll('#flame svg rect').length);
	check(rects >= 3, 'the flame graph has frames (' + rects + ')');
	await page.fill('#flame-search', 'Operation1');
	const details = await page.textContent('#flame-details');
	// Of all the window committed, as heaptrail table --range gives it: on a
	// loaded machine a range of the program's that the collector's read of
	// its map found late (its heap's 132 KiB, say) is stamped in the window
	// too (docs/session-protocol.md, "Mappings no hook saw").
	const committed = tableTotals('commit', trace, t1, t2).size;
	const found = /^.*?([\d.]+) MiB of ([\d.]+) MiB/.exec(details);
	check(found && found[1] === '40' && Math.abs(parseFloat(found[2]) * MB - committed) < 0.01 * MB,
		'flame graph search finds Operation1 with 40 MiB of the ' + committed + ' bytes committed in the window (' + details + ')');

	// The xperf view of the window: the spikes' stack on top of the committed view by st.
	await page.selectOption('#xperf-source', 'commit');
	await page.selectOption('#xperf-sort', 'st');
	const top = await page.evaluate(() => document.querySelector('#xperf-table .tabulator-row .lbl')?.textContent || '');
	check(top.startsWith('memtestapp!ManipulateTemporaryBuffer'), 'xperf view: top stack by st is ManipulateTemporaryBuffer (' + top + ')');

	check(browser.errors.length === 0, 'no console errors (' + browser.errors.join('; ') + ')');
	check(browser.requests.length === 0, 'no network requests (' + browser.requests.join(' ') + ')');
	mkdirSync(artifacts, { recursive: true });
	await page.screenshot({ path: join(artifacts, 'report-e2e.png'), fullPage: true });
	console.log('screenshot: ' + join(artifacts, 'report-e2e.png'));
	await browser.close();
	browser = null;

	browser = await openPage(modules, html + hash);
	const reopened = await browser.page.evaluate(() => [window.heaptrail.state.t1, window.heaptrail.state.t2]);
	const again4 = await rowCells(browser.page, 'commit-table', 'Transient');
	check(reopened[0] === t1 && reopened[1] === t2 && again4 && again4.count === '4', 'opening report.html' + hash + ' shows that window');
	await browser.close();
	browser = null;

	// Seed step 3: a window in the middle of the run, Handle -> Impacting ->
	// stack down to InnerLoopOperation, whose 40-byte objects are all still live.
	// How many the window holds depends on how much CPU the program got (about
	// 360 on a quiet machine, far fewer under load); the page must show exactly
	// the count the CLI finds.
	browser = await openPage(modules, html);
	{
		const p2 = browser.page;
		const d = await p2.evaluate(() => window.heaptrail.model.trace.duration_ns);
		const [h1, h2] = await dragWindow(p2, 0, 0.35 * d, 0.65 * d);
		await expandRow(p2, 'heap-table', 'malloc (handle 0x0)');
		await expandRow(p2, 'heap-table', 'Impacting');
		for (let k = 0; k < 30; k++) {
			const more = await p2.evaluate(() => {
				for (const row of document.querySelectorAll('#heap-table .tabulator-row')) {
					if (!row.querySelector('.lbl-frame')) continue;
					if (row.querySelector('.lbl').textContent.startsWith('memtestapp!InnerLoopOperation')) continue;
					const ctl = row.querySelector('.tabulator-data-tree-control');
					if (ctl && ctl.querySelector('.tabulator-data-tree-control-expand')) {
						ctl.click();
						return true;
					}
				}
				return false;
			});
			if (!more) break;
		}
		const leak = await rowCells(p2, 'heap-table', 'memtestapp!InnerLoopOperation()');
		const tj = JSON.parse(run(heaptrail, ['table', 'heap', trace, '--range', h1 + 'ns', h2 + 'ns', '--format', 'json']));
		let want = null;
		const walk = (n, impacting) => {
			if (n.impacting_type) impacting = n.impacting_type;
			if (impacting === 'Impacting' && n.stack && n.stack[0].startsWith('memtestapp!InnerLoopOperation')) want = n;
			for (const c of n.children || []) walk(c, impacting);
		};
		for (const g of tj.groups) walk(g, '');
		check(want && want.count >= 10 && want.size === 40 * want.count, 'heaptrail table: InnerLoopOperation allocated ' + (want && want.count) + ' objects of 40 bytes in the window');
		check(leak && leak.count === want.count.toLocaleString('en-US') && leak.impacting === leak.size,
			'heap table: InnerLoopOperation under Impacting with the same Count as heaptrail table, Impacting Size = Size (' + JSON.stringify(leak) + ')');
		check(browser.errors.length === 0, 'heap window: no console errors');
		await browser.close();
		browser = null;
	}

	// A report with a tiny exact budget bins the leak's 1200 blocks: the whole
	// trace and bucket-aligned windows still give heaptrail table's numbers.
	const small = join(tmp, 'binned.html');
	run(heaptrail, ['report', trace, '-o', small, '--exact', '50']);
	browser = await openPage(modules, small);
	const b = await browser.page.evaluate(() => ({ binned: window.heaptrail.model.heap.binned, w: window.heaptrail.model.heap.bucketNs, tot: window.heaptrail.totals() }));
	check(b.binned, 'with --exact 50 some heap sites are binned');
	await browser.page.waitForFunction(() => document.getElementById('dl-cmd').textContent.length > 0, null, { timeout: 20000 });
	const note = await browser.page.textContent('#dl-cmd');
	check(note.endsWith('(not byte for byte here: in binned sites, blocks held at exit count as freed then)'), 'binned report: the download commands say they differ (' + note + ')');
	const whole = JSON.parse(run(heaptrail, ['table', 'heap', trace, '--format', 'json'])).total;
	check(b.tot.heap.count === whole.count && b.tot.heap.size === whole.size && b.tot.heap.impacting === whole.impacting_size,
		'binned report: whole-trace heap totals equal heaptrail table');
	const a1 = 100 * b.w;
	const a2 = 200 * b.w;
	const aligned = await browser.page.evaluate(([x, y]) => {
		window.heaptrail.setWindow(x, y);
		return window.heaptrail.totals().heap;
	}, [a1, a2]);
	const ta = tableTotals('heap', trace, a1, a2);
	check(aligned.count === ta.count && aligned.size === ta.size && aligned.impacting === ta.impacting,
		'binned report: a bucket-aligned window equals heaptrail table (' + JSON.stringify(ta) + ')');
	check(browser.errors.length === 0, 'binned report: no console errors');
} finally {
	if (browser) await browser.close();
	rmSync(tmp, { recursive: true, force: true });
}
