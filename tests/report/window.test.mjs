// Unit test of the page's window arithmetic (src/report/js/window.js) in
// node, on a hand-made table: the [T1, T2) edges, the four types, Count,
// Size, Impacting Size, the grouped tree and the xperf keys.
//
//   node window.test.mjs

import { classify, windowSites, windowTotals, buildTree, xperfRows, AIFI, AIFO, AOFI, AOFO } from '../../src/report/js/window.js';
import { check } from './browser.mjs';

// The edges: an alloc at T1 is inside, a free at T2 is not inside.
check(classify(10, 20, 10, 30) === AIFI, 'alloc at T1 is inside');
check(classify(10, 30, 10, 30) === AIFO, 'free at T2 is outside (still live at the end)');
check(classify(5, 10, 10, 30) === AOFI, 'a free at exactly T1 is inside: AOFI');
check(classify(5, 9, 10, 30) === -1, 'freed before T1: not in the window');
check(classify(30, 40, 10, 30) === -1, 'allocated at T2: not in the window');
check(classify(5, Infinity, 10, 30) === AOFO, 'never freed, allocated before: AOFO');

// Two sites: site 0 (stack 1) and site 1 (stack 2), one process, one handle.
const MB = 1 << 20;
const lives = [
	// site, alloc, free, bytes
	[0, 100, 150, 10 * MB], // AIFI
	[0, 120, 400, 10 * MB], // AIFO
	[1, 50, 160, 4 * MB], // AOFI
	[1, 60, Infinity, 1 * MB], // AOFO
	[1, 210, 260, 2 * MB], // after the window
	[0, 110, 140, 4 * MB], // AIFI, a further piece of a committed range
];
const piece = [0, 0, 0, 0, 0, 1];
const n = lives.length;
const tab = {
	sites: { process: Int32Array.from([0, 0]), handle: Int32Array.from([0, 0]), stack: Int32Array.from([1, 2]) },
	items: {
		n,
		exactCount: n,
		site: Int32Array.from(lives.map((l) => l[0])),
		alloc: Float64Array.from(lives.map((l) => l[1])),
		free: Float64Array.from(lives.map((l) => l[2])),
		count: Float64Array.from(piece.map((p) => 1 - p)),
		blocks: new Float64Array(n).fill(1),
		bytes: Float64Array.from(lives.map((l) => l[3])),
		reallocs: Float64Array.from([0, 1, 0, 0, 0, 0]),
	},
};
const m = {
	stacks: [[], [0, 1], [0, 2]],
	frames: { names: ['a!main', 'a!spike', 'a!keep'], where: ['a.c:1', 'a.c:2', 'a.c:3'], images: ['a', 'a', 'a'], files: ['/src/a.c', '/src/a.c', null], lines: [1, 2, 0] },
};
const ws = windowSites(tab, 100, 200);
const tot = windowTotals(ws);
check(tot.count === 2 && tot.size === 24 * MB, 'Count and Size are the allocations made inside (2, 24 MB: a piece adds bytes, not count)');
check(tot.impacting === 10 * MB - 4 * MB, 'Impacting Size is AIFO - AOFI bytes (6 MB)');
check(tot.live === 5 && tot.outstanding === 11 * MB, 'five blocks meet the window, 11 MB outstanding at its end');

const labels = { process: () => 'p', handle: () => 'h' };
const rows = buildTree(m, tab, ws, ['process', 'impacting', 'stack'], labels);
const p = rows[0];
const tr = p._children.find((r) => r.label === 'Transient');
const im = p._children.find((r) => r.label === 'Impacting');
check(tr.count === 1 && tr.size === 14 * MB && tr.impacting === 0, 'Transient: Count 1, Size 14 MB, Impacting 0');
check(im.count === 1 && im.size === 10 * MB && im.impacting === 6 * MB, 'Impacting: Count 1, Size 10 MB, Impacting 6 MB');
check(tr._children[0].label === 'a!main' && tr._children[0]._children[0].label === 'a!spike', 'a stack expands outermost first');
check(tr._children[0]._children[0].where === 'a.c:2' && tr._children[0]._children[0].full === '/src/a.c:2', 'a frame row has its file:line and full path');
check(tr._children[0]._children[0]._children.length === 2 && tr._children[0]._children[0]._children[0].kind === 'block', 'the blocks are listed under their stack');

const xs = xperfRows(m, tab, ws, 'stacks');
const spike = xs.find((r) => r.name === 'a!spike \u2190 a!main');
check(spike.st === 24 * MB && spike.stc === 2 && spike.so === 10 * MB && spike.soc === 1 && spike.src === 1, 'xperf keys of the spike stack: st 24 MB, stc 2, so 10 MB, soc 1, src 1');
check(!xs.find((r) => r.name.startsWith('a!keep')), 'a stack with nothing allocated inside the window is not an xperf row');
