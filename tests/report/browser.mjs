// Shared by the report's browser tests: starts Debian's chromium headless
// through playwright-core (taken from the build dir's npm packages), with a
// fresh profile in a temp dir, no network, and collects console errors.

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function openPage(modules, htmlPath) {
	const require = createRequire(join(modules, 'noop.js'));
	const { chromium } = require('playwright-core');
	const profile = mkdtempSync(join(tmpdir(), 'heaptrail-report-chromium-'));
	const launched = chromium.launchPersistentContext(profile, {
		executablePath: process.env.HT_CHROMIUM || '/usr/bin/chromium',
		headless: true,
		viewport: { width: 1400, height: 1000 },
		args: [
			'--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync',
		],
	});
	let context;
	try {
		context = await launched;
	} catch (e) {
		rmSync(profile, { recursive: true, force: true });
		throw e;
	}
	const page = context.pages()[0] || (await context.newPage());
	const errors = [];
	const requests = [];
	page.on('console', (msg) => {
		if (msg.type() === 'error') errors.push(msg.text());
	});
	page.on('pageerror', (e) => errors.push(String(e)));
	page.on('request', (r) => {
		// blob: is the page's own downloads, never the network.
		if (!/^(file|data|blob):/.test(r.url())) requests.push(r.url());
	});
	const close = async () => {
		await context.close();
		// chromium may still be closing files: a few retries keep /tmp clean.
		rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
	};
	try {
		// Generous: the machine running the tests may be busy. The load of a
		// 0.4 MB page took chromium over playwright's default 30 s at a load
		// of 60-80 on 2 cores (report_controls, session 28).
		await page.goto('file://' + htmlPath, { timeout: 60000 });
		await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
	} catch (e) {
		await close();
		throw new Error('the report did not open: ' + e.message + (errors.length ? ' (page errors: ' + errors.join('; ') + ')' : ''));
	}
	return { page, errors, requests, close };
}

// Clicks the download button id and returns the file it saved: { name, text }.
export async function download(page, id) {
	const [d] = await Promise.all([page.waitForEvent('download', { timeout: 30000 }), page.click('#' + id)]);
	const failure = await d.failure();
	if (failure) throw new Error('download ' + id + ' failed: ' + failure);
	return { name: d.suggestedFilename(), text: readFileSync(await d.path(), 'utf8') };
}

/*
 * Parses an SVG document in the page (DOMParser, as a browser reads the
 * file): { ok, root, legends, series, windows, charts }, ok false with the
 * parser's message when it is not well-formed.
 */
export async function parseSvg(page, text) {
	return page.evaluate((t) => {
		const doc = new DOMParser().parseFromString(t, 'image/svg+xml');
		const err = doc.querySelector('parsererror');
		if (err) return { ok: false, error: err.textContent };
		const root = doc.documentElement;
		return {
			ok: true,
			root: root.localName + ' ' + root.namespaceURI,
			charts: [...root.querySelectorAll('g.chart')].map((g) => g.getAttribute('data-chart')),
			legends: [...root.querySelectorAll('text.legend')].map((e) => e.textContent),
			series: root.querySelectorAll('path.series').length,
			windows: root.querySelectorAll('rect.window').length,
		};
	}, text);
}

/*
 * The flame graph's boxes: { label (the box's text), title (its tooltip), x,
 * y } from d3-flame-graph's SVG, and the scrolling box's sizes.
 */
export async function flameBoxes(page) {
	return page.evaluate(() => {
		const box = document.getElementById('flame-box');
		const gs = [...document.querySelectorAll('#flame svg g.frame')];
		const boxes = gs.map((g) => {
			const m = /translate\(([-\d.]+),\s*([-\d.]+)\)/.exec(g.getAttribute('transform') || '');
			return {
				label: (g.querySelector('foreignObject') || g.querySelector('text') || {}).textContent || '',
				title: g.querySelector('title')?.textContent || '',
				x: m ? +m[1] : NaN,
				y: m ? +m[2] : NaN,
			};
		});
		return {
			boxes,
			clientHeight: box.clientHeight,
			scrollHeight: box.scrollHeight,
			scrollTop: box.scrollTop,
			overflowY: getComputedStyle(box).overflowY,
			svgHeight: +(document.querySelector('#flame svg')?.getAttribute('height') || 0),
			icicle: document.getElementById('flame-icicle').checked,
		};
	});
}

// A failed check: the message says what was expected and what was found.
export function check(cond, what) {
	if (!cond) throw new Error('check failed: ' + what);
	console.log('ok: ' + what);
}

// Drags on a chart from time t1 to t2 (ns), as a user selects a window.
export async function dragWindow(page, chartIndex, t1, t2) {
	const pos = await page.evaluate(
		([i, a, b]) => {
			const u = window.heaptrail.charts[i];
			const r = u.over.getBoundingClientRect();
			return { x1: r.left + u.valToPos(a / 1e9, 'x'), x2: r.left + u.valToPos(b / 1e9, 'x'), y: r.top + r.height / 2 };
		},
		[chartIndex, t1, t2],
	);
	await page.mouse.move(pos.x1, pos.y);
	await page.mouse.down();
	await page.mouse.move((pos.x1 + pos.x2) / 2, pos.y, { steps: 5 });
	await page.mouse.move(pos.x2, pos.y, { steps: 5 });
	await page.mouse.up();
	return page.evaluate(() => [window.heaptrail.state.t1, window.heaptrail.state.t2]);
}

// The cells of the tree-table row whose tree column reads label (first match).
export async function rowCells(page, tableId, label) {
	return page.evaluate(
		([id, lbl]) => {
			for (const row of document.querySelectorAll('#' + id + ' .tabulator-row')) {
				const cells = [...row.querySelectorAll('.tabulator-cell')];
				const l = cells[0].querySelector('.lbl');
				if (l && l.textContent.trim() === lbl) {
					const out = {};
					for (const c of cells) out[c.getAttribute('tabulator-field')] = c.textContent.trim();
					return out;
				}
			}
			return null;
		},
		[tableId, label],
	);
}

// Expands the row of tableId whose label starts with prefix, below the rows already expanded.
export async function expandRow(page, tableId, prefix) {
	const done = await page.evaluate(
		([id, p]) => {
			for (const row of document.querySelectorAll('#' + id + ' .tabulator-row')) {
				const l = row.querySelector('.lbl');
				if (!l || !l.textContent.trim().startsWith(p)) continue;
				const ctl = row.querySelector('.tabulator-data-tree-control');
				if (!ctl) return 'leaf';
				if (ctl.querySelector('.tabulator-data-tree-control-expand')) ctl.click();
				return 'expanded';
			}
			return null;
		},
		[tableId, prefix],
	);
	return done;
}

// The labels of the visible rows of a table, in order, with their tree depth.
export async function visibleLabels(page, tableId) {
	return page.evaluate((id) =>
		[...document.querySelectorAll('#' + id + ' .tabulator-row')].map((row) => {
			const l = row.querySelector('.lbl');
			return l ? l.textContent.trim() : '';
		}), tableId);
}
