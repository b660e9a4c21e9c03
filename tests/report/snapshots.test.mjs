// Unit test of the page's snapshot table (src/report/js/snapshots.js) in
// node, on hand-made trace data: one row per snapshot in order, the page's
// own marked, links to the pages of --all-snapshots or else the command that
// writes one, and the exit snapshots named.
//
//   node snapshots.test.mjs

import { snapshotRows } from '../../src/report/js/snapshots.js';
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

// A page written alone (no --all-snapshots): no links, the command instead.
rows = snapshotRows({ file: 'app.htr', snapshot: 1, snapshots: snaps.map((s) => ({ ...s, page: null })) });
check(rows[0].current && rows[1].href === null, 'no page: no link');
check(rows[1].command === 'heaptrail report app.htr --snapshot 2', 'the command that writes the other page');

// Not a snapshot trace: no rows.
check(snapshotRows({ file: 'full.htr', snapshot: 0, snapshots: [] }).length === 0, 'no snapshots, no table');
check(snapshotRows({ file: 'old.htr' }).length === 0, 'data without the snapshots key');
