// Unit test of the page's snapshot table (src/report/js/snapshots.js) in
// node, on hand-made trace data: one row per snapshot in order, the page's
// own marked, links to the pages of --all-snapshots or else the command that
// writes one, and the exit snapshots named; and the summary grid of a
// snapshot trace (summaryItems in summary.js).
//
//   node snapshots.test.mjs

import { snapshotRows } from '../../src/report/js/snapshots.js';
import { summaryItems } from '../../src/report/js/summary.js';
import { check } from './browser.mjs';

const snaps = [
	{ number: 1, ts_ns: 1500000, live_bytes: 150, live_count: 3, alloc_bytes: 200, alloc_count: 4, exit_pid: 41, page: 'app.1.html' },
	{ number: 2, ts_ns: 2000000000, live_bytes: 3 << 20, live_count: 1200, alloc_bytes: 4 << 20, alloc_count: 5000, exit_pid: 0, page: 'app.2.html' },
];
let rows = snapshotRows({ file: 'app.htr', snapshot: 2, snapshots: snaps });
check(rows.length === 2 && rows[0].number === 1 && rows[1].number === 2, 'one row per snapshot, in order');
check(!rows[0].current && rows[1].current, 'the page\'s own snapshot is marked, the other not');
check(rows[0].href === 'app.1.html' && rows[1].href === 'app.2.html', 'each links to its page');
check(rows[0].taken === 'at the exit of process 41 (its blocks alone)' && rows[1].taken === '', 'an exit snapshot says whose');
check(rows[0].live === '150 B in 3 blocks' && rows[1].live === '3 MiB in 1,200 blocks', 'live bytes and blocks');
check(rows[1].allocated === '4 MiB in 5,000 blocks', 'allocated since the start');
check(rows[0].time === '1.5 ms' && rows[1].time === '2 s', 'times since the start');
rows = snapshotRows({ file: 'app.htr', snapshot: 2, snapshots: [{ ...snaps[0], at_exec: true }] });
check(rows[0].taken === 'at the exec of process 41 (the image exec replaced, its blocks alone)', 'an exec\'d image\'s last snapshot says it is at the exec');

// A page written alone (no --all-snapshots): no links, the command instead.
rows = snapshotRows({ file: 'app.htr', snapshot: 1, snapshots: snaps.map((s) => ({ ...s, page: null })) });
check(rows[0].current && rows[1].href === null, 'no page: no link');
check(rows[1].command === 'heaptrail report app.htr --snapshot 2', 'the command that writes the other page');

// Not a snapshot trace: no rows.
check(snapshotRows({ file: 'full.htr', snapshot: 0, snapshots: [] }).length === 0, 'no snapshots, no table');
check(snapshotRows({ file: 'old.htr' }).length === 0, 'data without the snapshots key');

// The summary grid of a snapshot trace: the shown snapshot's live heap and
// its allocated counters, no peak or leak that snapshot mode never measured.
const page = {
	trace: { file: 'app.htr', snapshot: 2, snapshots: snaps, events: 10 },
	totals: { heap_leaked_bytes: 3 << 20, heap_leaked_count: 1200, heap_peak_bytes: 0, heap_peak_ns: 0 },
	processes: [],
};
const grid = Object.fromEntries(summaryItems(page));
check(grid['Live heap'] === '3 MiB in 1,200 blocks, at snapshot 2', 'live heap of the shown snapshot: ' + grid['Live heap']);
check(grid['Heap bytes allocated'] === '4 MiB in 5,000 blocks, up to snapshot 2', 'allocated from its counters: ' + grid['Heap bytes allocated']);
check(grid['Peak heap'].startsWith('not recorded in heap snapshot mode'), 'no peak claimed: ' + grid['Peak heap']);
check(!('Leaked at exit' in grid) && !('Heap calls' in grid), 'no leak or call counts in snapshot mode');
// A full trace keeps its rows.
const full = Object.fromEntries(summaryItems({ trace: { file: 'f.htr', events: 1 }, totals: { heap_peak_bytes: 2048, heap_peak_ns: 1000, heap_leaked_bytes: 0, heap_leaked_count: 0 }, processes: [] }));
check(full['Peak heap'] === '2 KiB at 1 us' && 'Leaked at exit' in full, 'a full trace: peak and leaks: ' + full['Peak heap']);
