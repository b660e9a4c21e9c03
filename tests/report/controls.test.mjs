// The report's controls on two small programs: deep_stack (allocations 100
// calls deep, as an interpreter's are) for the flame graph's scrolling box
// and icicle orientation, and custom_heap (pools declared with heap.h) for
// the heaps' names in the legend, the selectors, the tables and the SVG.
//
//   node controls.test.mjs --heaptrail BIN --programs DIR --modules DIR

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPage, check, flameBoxes, download, parseSvg, visibleLabels } from './browser.mjs';

const args = process.argv.slice(2);
const opt = (n) => args[args.indexOf(n) + 1];
const heaptrail = opt('--heaptrail');
const programs = opt('--programs');
const modules = opt('--modules');

function run(cmd, argv) {
	const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 120000 });
	if (r.status !== 0) throw new Error(cmd + ' ' + argv.join(' ') + ' failed (' + r.status + '): ' + r.stderr);
	return r.stdout;
}

// Records prog and writes its report; returns { trace, html, stdout }.
function recordReport(tmp, prog) {
	const trace = join(tmp, prog + '.htr');
	const html = join(tmp, prog + '.html');
	const stdout = run(heaptrail, ['record', '-o', trace, '--', join(programs, prog)]);
	run(heaptrail, ['report', trace, '-o', html]);
	return { trace, html, stdout };
}

// Waits for the flame graph to be drawn and its transition to end.
async function flameSettled(page) {
	await page.waitForSelector('#flame svg g.frame', { timeout: 20000 });
	await page.waitForTimeout(600);
	return flameBoxes(page);
}

const tmp = mkdtempSync(join(tmpdir(), 'heaptrail-report-controls-'));
let browser = null;
try {
	// ---- deep stacks: a box of fixed height that scrolls; icicle by default ----
	const deep = recordReport(tmp, 'deep_stack');
	browser = await openPage(modules, deep.html);
	let page = browser.page;
	await page.selectOption('#flame-metric', 'size');
	let fb = await flameSettled(page);
	const dives = fb.boxes.filter((b) => b.label === 'dive');
	// 100 nested calls of dive() down to the 1000-byte block, and one more box
	// at depth 50: the 500-byte block's own line in dive().
	check(dives.length === 101, 'the flame graph has the 101 frames of dive() (' + dives.length + ')');
	check(fb.svgHeight > 100 * 18 && fb.clientHeight === 480 && fb.overflowY === 'auto' && fb.scrollHeight > 4 * fb.clientHeight,
		'a ' + fb.svgHeight + ' px flame graph scrolls inside its 480 px box (scrollHeight ' + fb.scrollHeight + ')');
	const section = await page.evaluate(() => document.getElementById('flame-box').getBoundingClientRect().height);
	check(section <= 482, 'the flame graph takes ' + section + ' px of the page, not its own height');
	let root = fb.boxes.find((b) => b.label === 'all');
	check(fb.icicle && root.y === Math.min(...fb.boxes.map((b) => b.y)) && root.y === 0 && fb.scrollTop === 0,
		'deep stacks open as an icicle: the root on top, in view (icicle ' + fb.icicle + ', root y ' + root.y + ', scrollTop ' + fb.scrollTop + ')');
	const dive = dives[0];
	check(/^deep_stack!dive \(deep_stack\.c:\d+\): [\d.]+ (B|KiB) \([\d.]+%\)$/.test(dive.title),
		'the tooltip of a box is the whole frame with module and file:line (' + dive.title + ')');
	check(root.title === 'all: 1.46 KiB (100.00%)', 'the root sums both allocations, 1500 bytes (' + root.title + ')');
	// The user's choice wins: unticking icicle draws a flame, root at the bottom, scrolled into view.
	await page.click('#flame-icicle');
	fb = await flameSettled(page);
	root = fb.boxes.find((b) => b.label === 'all');
	check(!fb.icicle && root.y === Math.max(...fb.boxes.map((b) => b.y)) && fb.scrollTop === fb.scrollHeight - fb.clientHeight,
		'unticked: a flame, root at the bottom, the box scrolled down to it (root y ' + root.y + ', scrollTop ' + fb.scrollTop + ')');
	await page.selectOption('#flame-metric', 'count');
	fb = await flameSettled(page);
	check(!fb.icicle, 'the orientation chosen stays when the view changes');
	// Search looks at the whole frame: the module name finds every frame of it.
	await page.fill('#flame-search', 'deep_stack!dive');
	const found = await page.textContent('#flame-details');
	check(found === 'search "deep_stack!dive": 2 allocations of 2 allocations', 'search matches module!function (' + found + ')');
	check(browser.errors.length === 0, 'deep stacks: no console errors (' + browser.errors.join('; ') + ')');
	await browser.close();
	browser = null;

	// ---- custom heaps: their names everywhere ----
	const ch = recordReport(tmp, 'custom_heap');
	const m = /test pool=(0x[0-9a-f]+) second pool=(0x[0-9a-f]+)/.exec(ch.stdout);
	check(m, 'custom_heap printed its pools: ' + ch.stdout);
	const pid = JSON.parse(run(heaptrail, ['info', ch.trace, '--format', 'json'])).processes[0].pid;
	browser = await openPage(modules, ch.html);
	page = browser.page;
	const names = await page.evaluate(() => ({
		legend: window.heaptrail.charts[0].series.slice(1).map((s) => s.label),
		flame: [...document.querySelectorAll('#flame-source option')].map((o) => o.value + '=' + o.textContent),
		xperf: [...document.querySelectorAll('#xperf-source option')].map((o) => o.textContent),
	}));
	const proc = 'custom_heap (' + pid + ')';
	check(JSON.stringify(names.legend) === JSON.stringify([proc + ' malloc', proc + ' test pool', proc + ' second pool']),
		'heap graph legend names the heaps: ' + JSON.stringify(names.legend));
	check(JSON.stringify(names.flame) === '["heap=heap: all heaps","heap:0=heap: malloc","heap:1=heap: test pool","heap:2=heap: second pool","commit=committed"]',
		'the flame graph selector lists every heap by name: ' + JSON.stringify(names.flame));
	check(JSON.stringify(names.xperf) === '["heap: all heaps","heap: malloc","heap: test pool","heap: second pool","committed"]',
		'the xperf selector too: ' + JSON.stringify(names.xperf));
	const handles = (await visibleLabels(page, 'heap-table')).filter((l) => l.includes('(handle '));
	check(JSON.stringify(handles.sort()) === JSON.stringify(['malloc (handle 0x0)', 'second pool (handle ' + m[2] + ')', 'test pool (handle ' + m[1] + ')']),
		'the heap table names each handle: ' + JSON.stringify(handles));
	// One heap in the flame graph: the test pool's 7 allocations, 384 bytes (analyze --summary).
	const summary = JSON.parse(run(heaptrail, ['analyze', ch.trace, '--summary', '--format', 'json']));
	const pool = summary.items.find((i) => i.heap_name === 'test pool');
	await page.selectOption('#flame-metric', 'size');
	await page.selectOption('#flame-source', 'heap:1');
	fb = await flameSettled(page);
	const poolRoot = fb.boxes.find((b) => b.label === 'all');
	check(pool.total_bytes === 384 && poolRoot.title === 'all: 384 B (100.00%)', 'flame graph of the test pool alone: ' + poolRoot.title + ' (analyze: ' + pool.total_bytes + ')');
	check(fb.boxes.some((b) => b.label === 'pool_alloc') && !fb.boxes.some((b) => b.label === 'printf'), 'only the pool\'s stacks (pool_alloc, no printf)');
	const svg = await parseSvg(page, (await download(page, 'dl-svg')).text);
	check(svg.ok && svg.legends.slice(0, 3).join('|') === [proc + ' malloc', proc + ' test pool', proc + ' second pool'].join('|'),
		'the SVG legend names the heaps: ' + JSON.stringify(svg.legends));
	check(browser.errors.length === 0, 'custom heaps: no console errors (' + browser.errors.join('; ') + ')');
	check(browser.requests.length === 0, 'no network requests (' + browser.requests.join(' ') + ')');
} finally {
	if (browser) await browser.close();
	rmSync(tmp, { recursive: true, force: true });
}
