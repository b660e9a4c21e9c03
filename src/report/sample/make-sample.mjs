// Writes sample.json, a small hand-made report data file shaped like a 3 s
// run of examples/memtestapp (steady mappings, ten 10 MB spikes, a leak of
// 40-byte objects), for developing the page without a trace. Some heap blocks
// are binned to exercise the big-trace path.
//
//   node make-sample.mjs > sample.json

const MB = 1024 * 1024;
const D = 3e9; // 3 s
const TICKS = 1200;
const tick = D / TICKS;
const NB = 300; // series buckets
const W = D / NB;

const modules = ['memtestapp', 'libc.so.6', 'libstdc++.so.6'];
const frames = { name: [], file: [], line: [], module: [] };
const frame = (name, file, line, module) => {
	frames.name.push(name);
	frames.file.push(file);
	frames.line.push(line);
	frames.module.push(module);
	return frames.name.length - 1;
};
const fStart = frame('libc.so.6!__libc_start_call_main', null, 0, 1);
const fMain = frame('memtestapp!main', '/src/examples/memtestapp.cpp', 150, 0);
const fMain2 = frame('memtestapp!main', '/src/examples/memtestapp.cpp', 165, 0);
const fOp1 = frame('memtestapp!Operation1(long long)', '/src/examples/memtestapp.cpp', 105, 0);
const fMtb = frame('memtestapp!ManipulateTemporaryBuffer(long long)', '/src/examples/memtestapp.cpp', 90, 0);
const fInner = frame('memtestapp!InnerLoopOperation()', '/src/examples/memtestapp.cpp', 112, 0);
const fMainInner = frame('memtestapp!main', '/src/examples/memtestapp.cpp', 163, 0);
const fMainSpike = frame('memtestapp!main', '/src/examples/memtestapp.cpp', 175, 0);
const fInit = frame('libstdc++.so.6!0x9a3f0', null, 0, 2);

const stacks = [
	[],
	[fStart, fMain],                 // 1: steady 1
	[fStart, fMain2],                // 2: steady 2
	[fStart, fMainSpike, fOp1, fMtb], // 3: spikes
	[fStart, fMainInner, fInner],    // 4: the leak
	[fInit],                         // 5: start-up allocation, binned
];

const binned = () => ({ site: [], alloc: [], free: [], count: [], blocks: [], bytes: [], reallocs: [] });
const heap = { sites: { process: [0, 0], handle: [0, 0], stack: [4, 5] }, lives: [], bucket_ns: W, binned: binned() };
const commit = { sites: { process: [0, 0, 0], handle: [0, 0, 0], stack: [1, 2, 3] }, lives: [], bucket_ns: W, binned: binned() };
const life = (t, site, size, a, f) => t.lives.push({ site, size, a: Math.round(a), f: f < 0 ? -1 : Math.round(f) });

// The contract's exact columns: grouped by site, alloc deltas, life = free - alloc.
function encode(t) {
	const ex = { site_count: t.sites.stack.map(() => 0), size: [], alloc: [], life: [], realloc: [], piece: [] };
	const sorted = t.lives.slice().sort((x, y) => x.site - y.site || x.a - y.a);
	let prev = -1;
	let last = 0;
	for (const l of sorted) {
		if (l.site !== prev) last = 0;
		prev = l.site;
		ex.site_count[l.site]++;
		ex.size.push(l.size);
		ex.alloc.push(l.a - last);
		ex.life.push(l.f < 0 ? -1 : l.f - l.a);
		ex.realloc.push(0);
		ex.piece.push(0);
		last = l.a;
	}
	const out = { sites: t.sites, exact: ex, bucket_ns: t.bucket_ns, binned: t.binned };
	return out;
}

const t0 = 1e6; // the program starts 1 ms into the trace
for (let i = 0; i < TICKS; i++) life(heap, 0, 40, t0 + i * tick + 1000, -1);
// Start-up blocks, binned: 50 blocks of 1 KB in bucket 0 freed in bucket 1.
heap.binned.site.push(1);
heap.binned.alloc.push(0);
heap.binned.free.push(1);
heap.binned.count.push(50);
heap.binned.blocks.push(50);
heap.binned.bytes.push(50 * 1024);
heap.binned.reallocs.push(5);

const end = t0 + TICKS * tick - 5e6;
life(commit, 0, 10 * MB, t0 + 10000, end + 2000);
life(commit, 1, 10 * MB, t0 + (TICKS / 2) * tick + 5000, end + 1000);
const hold = 10e6;
for (let s = 0; s < 10; s++) {
	const a = t0 + (s * 120 + 60) * tick + 3000;
	life(commit, 2, 10 * MB, a, a + hold);
}

// Series: the largest value of each bucket, from the lifetimes.
function series(t, filter) {
	const ev = [];
	for (const l of t.lives) {
		if (!filter(l.site)) continue;
		ev.push([l.a, l.size]);
		if (l.f >= 0) ev.push([l.f, -l.size]);
	}
	ev.sort((a, b) => a[0] - b[0]);
	const max = new Array(NB).fill(0);
	const last = new Array(NB).fill(0);
	let cur = 0;
	let j = 0;
	for (let b = 0; b < NB; b++) {
		let m = cur;
		while (j < ev.length && ev[j][0] < (b + 1) * W) {
			cur += ev[j++][1];
			if (cur > m) m = cur;
		}
		max[b] = m;
		last[b] = cur;
	}
	return { max, last };
}
const hs = series(heap, () => true);
const cs = series(commit, () => true);
const rss = { max: cs.max.map((v, i) => v + 3 * MB + i * 100), last: cs.last.map((v, i) => v + 3 * MB + i * 100) };

const data = {
	format: 'heaptrail-report',
	version: 1,
	trace: { file: 'sample.htr', argv: ['examples/memtestapp', '--seconds', '3'], hostname: 'sample-host', start_realtime_ns: 1.7e18, duration_ns: D, events: 2524, events_lost: 0, complete: true, symbols: true, truncated: false, lossy: false },
	totals: {
		heap_allocs: 1250, heap_frees: 50, heap_reallocs: 5, heap_alloc_bytes: 1200 * 40 + 50 * 1024,
		heap_peak_bytes: 48000, heap_peak_ns: D - 2e6, heap_leaked_count: 1200, heap_leaked_bytes: 48000, unknown_frees: 0,
		commit_count: 12, commit_bytes: 120 * MB, commit_peak_bytes: 30 * MB, commit_peak_ns: 1.65e9, rss_peak_bytes: 33 * MB, rss_peak_ns: 1.65e9,
	},
	processes: [{ pid: 4242, ppid: 4241, exe: '/src/build/examples/memtestapp', argv: ['examples/memtestapp', '--seconds', '3'], start_ns: 0, end_ns: D, status: 'exit 0' }],
	modules,
	frames,
	stacks,
	handles: ['0x0'],
	heap: encode(heap),
	commit: encode(commit),
	series: { bucket_ns: W, count: NB, heap: [{ process: 0, handle: 0, ...hs }], commit: [{ process: 0, ...cs }], rss: [{ process: 0, ...rss }] },
	limits: { exact_budget: 200000, exact_sites: 1, binned_sites: 1 },
};
process.stdout.write(JSON.stringify(data) + '\n');
