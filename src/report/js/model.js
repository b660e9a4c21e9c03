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
	const ne = t.exact.site.length;
	const nb = t.binned ? t.binned.site.length : 0;
	const n = ne + nb;
	const it = {
		n,
		exactCount: ne,
		site: new Int32Array(n),
		alloc: new Float64Array(n),
		free: new Float64Array(n),
		count: new Float64Array(n),
		bytes: new Float64Array(n),
		reallocs: new Float64Array(n),
	};
	for (let i = 0; i < ne; i++) {
		it.site[i] = t.exact.site[i];
		it.alloc[i] = t.exact.alloc[i];
		const f = t.exact.free[i];
		it.free[i] = f < 0 ? NEVER : f;
		it.count[i] = 1;
		it.bytes[i] = t.exact.size[i];
		it.reallocs[i] = t.exact.realloc[i];
	}
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
		it.bytes[i] = t.binned.bytes[j];
		it.reallocs[i] = t.binned.reallocs[j];
	}
	return { sites, items: it, bucketNs: w, binned: nb > 0 };
}

// The label of a frame: "module!function" and, separately, "file:line".
function frameLabels(d) {
	const f = d.frames;
	const n = f.name.length;
	const names = new Array(n);
	const where = new Array(n);
	const images = new Array(n);
	for (let i = 0; i < n; i++) {
		names[i] = f.name[i];
		where[i] = f.file[i] ? baseName(f.file[i]) + (f.line[i] ? ':' + f.line[i] : '') : '';
		images[i] = f.module[i] >= 0 ? d.modules[f.module[i]] : '?';
	}
	return { names, where, images, files: f.file, lines: f.line };
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

// Short process label: "memtestapp (1234)".
export function processLabel(m, p) {
	const pr = m.processes[p];
	if (!pr) return '?';
	return baseName(pr.exe || '?') + ' (' + pr.pid + ')';
}
