// Shared by the report's browser tests: starts Debian's chromium headless
// through playwright-core (taken from the build dir's npm packages), with a
// fresh profile in a temp dir, no network, and collects console errors.

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
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
		if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) requests.push(r.url());
	});
	const close = async () => {
		await context.close();
		// chromium may still be closing files: a few retries keep /tmp clean.
		rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
	};
	try {
		await page.goto('file://' + htmlPath);
		// Generous: the machine running the tests may be busy.
		await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
	} catch (e) {
		await close();
		throw new Error('the report did not open: ' + e.message + (errors.length ? ' (page errors: ' + errors.join('; ') + ')' : ''));
	}
	return { page, errors, requests, close };
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
