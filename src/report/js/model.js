// Turns the report's JSON (the contract in docs/report.md) into flat typed
// arrays the window computations can scan quickly: one "item" per exact
// lifetime or per time-bucketed cell, each pointing at a site (process,
// handle, stack).

export const NEVER = Infinity;

// Decodes one table of lifetimes ("heap" or "commit").
function decodeTable(t, trace) {
	const sites = {
		process: Int32Array.from(t.sites.process),
		handle: Int32Array.from(t.sites.handle),
		stack: Int32Array.from(t.sites.stack),
	};
	const ex = t.exact;
	const ne = ex.size.length;
	const nb = t.binned ? t.binned.site.length : 0;
	const n = ne + nb;
	const it = {
		n,
		exactCount: ne,
		site: new Int32Array(n),
		alloc: new Float64Array(n),
		free: new Float64Array(n),
		count: new Float64Array(n),
		blocks: new Float64Array(n),
		bytes: new Float64Array(n),
		reallocs: new Float64Array(n),
		// 1: an exact lifetime its process held until exit or exec (free is
		// that moment); analyze and export count it as never freed.
		exit: new Uint8Array(ne),
	};
	// Exact lifetimes come grouped by site, alloc as deltas within a site and
	// life = free - alloc (docs/report.md).
	let i = 0;
	for (let s = 0; s < ex.site_count.length; s++) {
		let a = 0;
		for (let k = 0; k < ex.site_count[s]; k++, i++) {
			a += ex.alloc[i];
			it.site[i] = s;
			it.alloc[i] = a;
			it.free[i] = ex.life[i] < 0 ? NEVER : a + ex.life[i];
			it.count[i] = ex.piece[i] ? 0 : ex.count ? ex.count[i] : 1;
			it.blocks[i] = 1;
			it.bytes[i] = ex.size[i];
			it.reallocs[i] = ex.realloc[i];
			it.exit[i] = ex.exit ? ex.exit[i] : 0;
		}
	}
	if (i !== ne) throw new Error('report data: exact lifetimes do not add up');
	// A binned cell stands for its blocks at the middle of their buckets: exact
	// whenever the window's edges fall on bucket boundaries.
	const w = t.bucket_ns || 1;
	for (let j = 0; j < nb; j++) {
		const i = ne + j;
		it.site[i] = t.binned.site[j];
		it.alloc[i] = (t.binned.alloc[j] + 0.5) * w;
		const f = t.binned.free[j];
		it.free[i] = f < 0 ? NEVER : (f + 0.5) * w;
		it.count[i] = t.binned.count[j];
		it.blocks[i] = t.binned.blocks[j];
		it.bytes[i] = t.binned.bytes[j];
		it.reallocs[i] = t.binned.reallocs[j];
	}
	return { sites, items: it, bucketNs: w, binned: nb > 0 };
}

// The label of a frame: "module!function" and, separately, "file:line";
// short is the function alone (the flame graph's boxes: the module is in
// their tooltip), as 'heaptrail export --format collapsed' writes frames.
function frameLabels(d) {
	const f = d.frames;
	const n = f.name.length;
	const names = new Array(n);
	const short = new Array(n);
	const where = new Array(n);
	const images = new Array(n);
	for (let i = 0; i < n; i++) {
		names[i] = f.name[i];
		where[i] = f.file[i] ? baseName(f.file[i]) + (f.line[i] ? ':' + f.line[i] : '') : '';
		images[i] = f.module[i] >= 0 ? d.modules[f.module[i]] : '?';
		const prefix = f.module[i] >= 0 ? images[i] + '!' : null;
		short[i] = prefix && names[i].startsWith(prefix) ? names[i].slice(prefix.length) : names[i];
	}
	return { names, short, where, images, files: f.file, lines: f.line };
}

function baseName(p) {
	const i = p.lastIndexOf('/');
	return i >= 0 ? p.slice(i + 1) : p;
}

export function loadModel(d) {
	if (!d || d.format !== 'heaptrail-report') throw new Error('not heaptrail report data');
	if (d.version !== 1) throw new Error('report data version ' + d.version + ' is not supported');
	const m = {
		raw: d,
		trace: d.trace,
		totals: d.totals,
		processes: d.processes,
		handles: d.handles,
		heapNames: heapNames(d),
		stacks: d.stacks,
		frames: frameLabels(d),
		heap: decodeTable(d.heap, d.trace),
		commit: decodeTable(d.commit, d.trace),
		series: d.series,
		limits: d.limits || {},
		// The whole trace as a window: every block, live or not, meets it.
		fullWindow: [0, d.trace.duration_ns + 1],
	};
	return m;
}

// The names of the heaps by "process/handle" index: heap.h's names, and
// "malloc" for the process heap (handle 0x0) in every process.
function heapNames(d) {
	const names = new Map();
	for (const h of d.heap_names || []) names.set(h.process + '/' + h.handle, h.name);
	return names;
}

/*
 * A heap as people read it: "malloc" for the process heap, heap.h's name for
 * a custom heap, "heap 0x55d0c0" for one without a name. process -1 takes
 * the name any process gave the handle (the selectors list handles, not
 * processes).
 */
export function heapLabel(m, p, h) {
	if (m.handles[h] === '0x0') return 'malloc';
	let name = m.heapNames.get(p + '/' + h);
	if (name === undefined && p < 0) for (const [k, v] of m.heapNames) if (k.endsWith('/' + h)) name = v;
	return name === undefined ? 'heap ' + m.handles[h] : name;
}

// Short process label: "memtestapp (1234)".
export function processLabel(m, p) {
	const pr = m.processes[p];
	if (!pr) return '?';
	return baseName(pr.exe || '?') + ' (' + pr.pid + ')';
}
