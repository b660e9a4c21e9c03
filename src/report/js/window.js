// The window arithmetic of WPA's Heap Allocations and Commit Lifetimes tables,
// the same rules as src/analysis/window.h: a window is [t1, t2); a block
// meets it when alloc < t2 and free >= t1; AIFI is Transient, the other three
// types are Impacting; Count and Size are the blocks allocated inside;
// Impacting Size is AIFO bytes minus AOFI bytes.

export const AIFI = 0;
export const AIFO = 1;
export const AOFI = 2;
export const AOFO = 3;
export const TYPE_NAMES = ['AIFI', 'AIFO', 'AOFI', 'AOFO'];

export function classify(a, f, t1, t2) {
	if (!(a < t2) || !(f >= t1)) return -1;
	if (a >= t1) return f < t2 ? AIFI : AIFO;
	return f < t2 ? AOFI : AOFO;
}

export function impactingName(type) {
	return type === AIFI ? 'Transient' : 'Impacting';
}

// How many allocation rows a table shows under one stack and type.
const ROWS_PER_LEAF = 100;

/*
 * Sums per site and type for window [t1, t2) over one table (model.heap or
 * model.commit): cnt (allocations; a further piece of a committed range is
 * not one), blk (blocks, pieces included), bytes and rea (reallocs) are
 * indexed site * 4 + type. rows maps
 * site * 4 + type to the indices of the exact lifetimes (at most
 * ROWS_PER_LEAF each) so tables can list the individual blocks.
 */
export function windowSites(tab, t1, t2) {
	const ns = tab.sites.stack.length;
	const cnt = new Float64Array(ns * 4);
	const blk = new Float64Array(ns * 4);
	const bytes = new Float64Array(ns * 4);
	const rea = new Float64Array(ns * 4);
	const rows = new Map();
	const it = tab.items;
	for (let i = 0; i < it.n; i++) {
		const t = classify(it.alloc[i], it.free[i], t1, t2);
		if (t < 0) continue;
		const k = it.site[i] * 4 + t;
		cnt[k] += it.count[i];
		blk[k] += it.blocks[i];
		bytes[k] += it.bytes[i];
		rea[k] += it.reallocs[i];
		if (i < it.exactCount) {
			let r = rows.get(k);
			if (!r) rows.set(k, (r = []));
			if (r.length < ROWS_PER_LEAF) r.push(i);
		}
	}
	return { t1, t2, nsites: ns, cnt, blk, bytes, rea, rows };
}

// Count, Size, Impacting Size and Live of one site restricted to some types.
export function siteStats(ws, s, types) {
	let count = 0;
	let size = 0;
	let impacting = 0;
	let live = 0;
	for (const t of types) {
		const k = s * 4 + t;
		if (!ws.blk[k]) continue;
		live += ws.blk[k];
		if (t === AIFI || t === AIFO) {
			count += ws.cnt[k];
			size += ws.bytes[k];
		}
		if (t === AIFO) impacting += ws.bytes[k];
		if (t === AOFI) impacting -= ws.bytes[k];
	}
	return { count, size, impacting, live };
}

const ALL_TYPES = [AIFI, AIFO, AOFI, AOFO];

// Totals of the whole window (every site, every type).
export function windowTotals(ws) {
	const tot = { count: 0, size: 0, impacting: 0, live: 0, outstanding: 0 };
	for (let s = 0; s < ws.nsites; s++) {
		const st = siteStats(ws, s, ALL_TYPES);
		tot.count += st.count;
		tot.size += st.size;
		tot.impacting += st.impacting;
		tot.live += st.live;
		tot.outstanding += ws.bytes[s * 4 + AIFO] + ws.bytes[s * 4 + AOFO];
	}
	return tot;
}

// The full source path of a frame, for tooltips.
function fullWhere(m, f) {
	const file = m.frames.files[f];
	return file ? file + (m.frames.lines[f] ? ':' + m.frames.lines[f] : '') : '';
}

function newNode(label, extra) {
	return Object.assign({ label, where: '', count: 0, size: 0, impacting: 0, live: 0, kids: null }, extra);
}

// Remembers which site and types a group holds, so a click can highlight them.
function mark(node, s, types) {
	if (!node.sk) node.sk = [];
	for (const t of types) node.sk.push(s * 4 + t);
}

function addStats(node, st) {
	node.count += st.count;
	node.size += st.size;
	node.impacting += st.impacting;
	node.live += st.live;
}

function child(node, key, make) {
	if (!node.kids) node.kids = new Map();
	let c = node.kids.get(key);
	if (!c) node.kids.set(key, (c = make()));
	return c;
}

/*
 * WPA's grouped tree for one table: levels is a list of 'process', 'handle',
 * 'impacting', 'type' and 'stack' (the stack expands frame by frame, from the
 * outermost caller to the allocation site, then to the blocks themselves).
 * Returns Tabulator tree rows: { label, where, type, count, size, impacting,
 * live, alloc, free, _children }.
 */
export function buildTree(m, tab, ws, levels, labels) {
	const root = newNode('root');
	const typeSets = levels.includes('type')
		? ALL_TYPES.map((t) => [t])
		: levels.includes('impacting')
			? [[AIFI], [AIFO, AOFI, AOFO]]
			: [ALL_TYPES];
	for (let s = 0; s < ws.nsites; s++) {
		for (const types of typeSets) {
			const st = siteStats(ws, s, types);
			if (!st.live) continue;
			let node = root;
			addStats(node, st);
			for (const lv of levels) {
				if (lv === 'process') {
					const p = tab.sites.process[s];
					node = child(node, 'p' + p, () => newNode(labels.process(p), { kind: 'process' }));
					addStats(node, st);
					mark(node, s, types);
				} else if (lv === 'handle') {
					const h = tab.sites.handle[s];
					node = child(node, 'h' + h, () => newNode(labels.handle(h, tab.sites.process[s]), { kind: 'handle' }));
					addStats(node, st);
					mark(node, s, types);
				} else if (lv === 'impacting') {
					const name = impactingName(types[0]);
					node = child(node, name, () => newNode(name, { kind: 'impacting' }));
					addStats(node, st);
					mark(node, s, types);
				} else if (lv === 'type') {
					const name = TYPE_NAMES[types[0]];
					node = child(node, name, () => newNode(name, { kind: 'type', type: name }));
					addStats(node, st);
					mark(node, s, types);
				} else if (lv === 'stack') {
					const frames = m.stacks[tab.sites.stack[s]] || [];
					if (!frames.length) {
						node = child(node, 'nostack', () => newNode('[no stack]', { kind: 'frame' }));
						addStats(node, st);
						mark(node, s, types);
					}
					for (const f of frames) {
						node = child(node, 'f' + f, () =>
							newNode(m.frames.names[f], { kind: 'frame', where: m.frames.where[f], full: fullWhere(m, f) }));
						addStats(node, st);
						mark(node, s, types);
					}
				}
			}
			if (levels.includes('stack')) addBlocks(node, tab, ws, s, types);
		}
	}
	return toRows(root, '').kids;
}

// The individual blocks of a site under its innermost frame (exact lifetimes only).
function addBlocks(node, tab, ws, s, types) {
	const it = tab.items;
	for (const t of types) {
		const r = ws.rows.get(s * 4 + t);
		if (!r) continue;
		for (const i of r) {
			const blk = newNode('block', { kind: 'block', type: TYPE_NAMES[t], alloc: it.alloc[i], free: it.free[i] });
			addStats(blk, {
				count: t === AIFI || t === AIFO ? 1 : 0,
				size: t === AIFI || t === AIFO ? it.bytes[i] : 0,
				impacting: t === AIFO ? it.bytes[i] : t === AOFI ? -it.bytes[i] : 0,
				live: 1,
			});
			blk.bytes = it.bytes[i];
			child(node, 'b' + i, () => blk);
		}
	}
}

// path names a row by its keys from the root, the same in every window, so
// the tables can keep what the user expanded when the window changes.
function toRows(node, path) {
	const row = {
		path,
		label: node.label,
		where: node.where,
		kind: node.kind || '',
		type: node.type || '',
		count: node.count,
		size: node.size,
		impacting: node.impacting,
		live: node.live,
		alloc: node.alloc,
		free: node.free,
		bytes: node.bytes,
		full: node.full || '',
		sk: node.sk,
	};
	if (node.kids) {
		const kids = [...node.kids.entries()].map(([k, c]) => toRows(c, path + '/' + k));
		kids.sort((a, b) => b.size - a.size || b.live - a.live);
		row.kids = kids;
		row._children = kids;
	}
	return row;
}

/*
 * The [alloc, free) spans of the exact lifetimes in window ws whose site and
 * type (site * 4 + type) are in keys, at most limit of them: what a click on
 * a table row highlights on the graph. Free is capped at end.
 */
export function spans(tab, ws, keys, end, limit = 20000) {
	const want = new Set(keys);
	const it = tab.items;
	const out = [];
	for (let i = 0; i < it.exactCount && out.length < limit; i++) {
		const t = classify(it.alloc[i], it.free[i], ws.t1, ws.t2);
		if (t >= 0 && want.has(it.site[i] * 4 + t)) out.push([it.alloc[i], Math.min(it.free[i], end)]);
	}
	return out;
}

// Per-site values for the flame graph and the xperf view.
export const METRICS = {
	outstanding: (ws, s) => ws.bytes[s * 4 + AIFO] + ws.bytes[s * 4 + AOFO],
	size: (ws, s) => ws.bytes[s * 4 + AIFI] + ws.bytes[s * 4 + AIFO],
	count: (ws, s) => ws.cnt[s * 4 + AIFI] + ws.cnt[s * 4 + AIFO],
};

/*
 * A d3-flame-graph tree { name, full, value, children } of metric over the
 * sites (those keep(site) accepts, when given), callers first (a classic
 * flame graph) or, with callees, allocation sites first (an inverted,
 * bottom-up view). name is the function, full the whole frame with its
 * module and file:line (tooltip and search). depth is the deepest level.
 */
export function flameTree(m, tab, ws, metric, callees, keep = null) {
	const root = { name: 'all', full: 'all', value: 0, kids: new Map() };
	let depth = 0;
	for (let s = 0; s < ws.nsites; s++) {
		if (keep && !keep(s)) continue;
		const v = metric(ws, s);
		if (!v) continue;
		let frames = m.stacks[tab.sites.stack[s]] || [];
		if (callees) frames = frames.slice().reverse();
		root.value += v;
		let node = root;
		for (const f of frames) {
			let c = node.kids.get(f);
			if (!c) {
				const w = m.frames.where[f];
				c = { name: m.frames.short[f], full: m.frames.names[f] + (w ? ' (' + w + ')' : ''), value: 0, kids: new Map() };
				node.kids.set(f, c);
			}
			c.value += v;
			node = c;
		}
		depth = Math.max(depth, frames.length);
	}
	const conv = (n) => ({ name: n.name, full: n.full, value: n.value, children: [...n.kids.values()].map(conv) });
	const tree = conv(root);
	tree.depth = depth;
	return tree;
}

// xperf's sort keys and the columns they sort by.
export const SORT_KEYS = {
	so: 'outstanding size',
	soc: 'outstanding count',
	st: 'total size',
	stc: 'total count',
	src: 'realloc count',
};

/*
 * The sites live at one moment (the heap's peak): a window [t, t + 1), whose
 * AIFO and AOFO blocks are those allocated at or before t and freed after
 * it; METRICS.outstanding over it is what was live then, as 'heaptrail
 * analyze --at-peak' counts.
 */
export function momentSites(tab, t) {
	return windowSites(tab, t, t + 1);
}

/*
 * The xperf heap view over the window: rows aggregated by 'stacks' (culled
 * stack), 'frames' (innermost frame after culling) or 'images' (its module),
 * with so, soc, st, stc, src as xperf counts them for -range: total is what was
 * allocated inside the window, outstanding what of that is not freed in it.
 * With atMoment (ws from momentSites()), every block live then is counted,
 * outstanding, as 'analyze --at-peak' does. keep(site), when given, picks
 * the sites (one heap).
 */
export function xperfRows(m, tab, ws, by, atMoment = false, keep = null) {
	const rows = new Map();
	for (let s = 0; s < ws.nsites; s++) {
		if (keep && !keep(s)) continue;
		// At a moment the live blocks are AIFO and AOFO; in a window, what was
		// allocated inside: AIFI and AIFO.
		const ki = s * 4 + (atMoment ? AOFO : AIFI);
		const ko = s * 4 + AIFO;
		const stc = atMoment ? ws.blk[ki] + ws.blk[ko] : ws.cnt[ki] + ws.cnt[ko];
		if (!stc) continue;
		const stack = tab.sites.stack[s];
		const frames = m.stacks[stack] || [];
		const inner = frames.length ? frames[frames.length - 1] : -1;
		let key;
		let name;
		if (by === 'stacks') {
			key = stack;
			// The caller tells apart stacks that end in the same frame.
			name = inner >= 0 ? m.frames.names[inner] : '[no stack]';
			if (frames.length > 1) name += ' \u2190 ' + m.frames.names[frames[frames.length - 2]];
		} else if (by === 'frames') {
			key = inner;
			name = inner >= 0 ? m.frames.names[inner] : '[no stack]';
		} else {
			name = inner >= 0 ? m.frames.images[inner] : '?';
			key = name;
		}
		let r = rows.get(key);
		if (!r) rows.set(key, (r = { name, stack: by === 'stacks' ? stack : -1, so: 0, soc: 0, st: 0, stc: 0, src: 0 }));
		r.so += atMoment ? ws.bytes[ki] + ws.bytes[ko] : ws.bytes[ko];
		r.soc += atMoment ? stc : ws.cnt[ko];
		r.st += ws.bytes[ki] + ws.bytes[ko];
		r.stc += stc;
		r.src += ws.rea[ki] + ws.rea[ko];
	}
	return [...rows.values()];
}
