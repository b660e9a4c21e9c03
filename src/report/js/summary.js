// The Summary section: the trace's command, host and times, the totals of
// 'heaptrail info', notes about the trace, and the table of processes.

import { fmtBytes, fmtCount, fmtTime, esc } from './format.js';
import { snapshots } from './snapshots.js';

const $ = (id) => document.getElementById(id);

// The summary grid's rows, [label, text]. A heap snapshot trace has no
// allocation calls, frees or peak: its heap is the shown snapshot's live
// blocks, and what was allocated comes from that snapshot's counters.
export function summaryItems(m) {
	const t = m.trace;
	const T = m.totals;
	const sn = t.snapshot ? (t.snapshots || []).find((x) => x.number === t.snapshot) : null;
	const heap = t.snapshot
		? [
			['Live heap', fmtBytes(T.heap_leaked_bytes) + ' in ' + fmtCount(T.heap_leaked_count) + ' blocks, at snapshot ' + t.snapshot],
			['Heap bytes allocated', sn ? fmtBytes(sn.alloc_bytes) + ' in ' + fmtCount(sn.alloc_count) + ' blocks, up to snapshot ' + t.snapshot : 'not known'],
			['Peak heap', 'not recorded in heap snapshot mode (each snapshot is listed below)'],
		]
		: [
			['Heap calls', fmtCount(T.heap_allocs) + ' allocations, ' + fmtCount(T.heap_frees) + ' frees, ' + fmtCount(T.heap_reallocs) + ' reallocs'],
			['Heap bytes allocated', fmtBytes(T.heap_alloc_bytes)],
			['Peak heap', fmtBytes(T.heap_peak_bytes) + ' at ' + fmtTime(T.heap_peak_ns)],
			['Leaked at exit', fmtBytes(T.heap_leaked_bytes) + ' in ' + fmtCount(T.heap_leaked_count) + ' blocks'],
		];
	return [
		['Trace', t.file || ''],
		['Host', t.hostname || ''],
		['Recorded', t.start_realtime_ns ? new Date(t.start_realtime_ns / 1e6).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : ''],
		['Duration', fmtTime(t.duration_ns)],
		['Processes', fmtCount(m.processes.length)],
		...heap,
		['Commits', fmtCount(T.commit_count) + ', ' + fmtBytes(T.commit_bytes)],
		['Peak committed', fmtBytes(T.commit_peak_bytes) + ' at ' + fmtTime(T.commit_peak_ns)],
		['Peak RSS', T.rss_peak_bytes ? fmtBytes(T.rss_peak_bytes) + ' at ' + fmtTime(T.rss_peak_ns) : 'not sampled'],
		['Events', fmtCount(t.events) + (t.events_lost ? ', ' + fmtCount(t.events_lost) + ' lost' : ', none lost')],
	];
}

export function summary(m) {
	const t = m.trace;
	const cmd = (t.argv || []).join(' ');
	document.title = 'heaptrail report: ' + (cmd || t.file || '');
	$('title-cmd').textContent = cmd || '(unknown command)';
	const items = summaryItems(m);
	const flags = [];
	if (!t.complete) flags.push('the trace was not finished');
	if (t.truncated) flags.push('the trace is truncated');
	if (!t.symbols) flags.push('no symbols');
	if (t.sample_rate)
		flags.push('sampled trace (--sample-rate ' + fmtBytes(t.sample_rate) + '): heap sizes and counts are estimates from one allocation per ' + fmtBytes(t.sample_rate) + ' on average');
	if (t.snapshot)
		flags.push('heap snapshot trace: the heap shown is snapshot ' + t.snapshot + ' of ' + (t.snapshots || []).length + ', at ' + fmtTime(t.snapshot_ts_ns) + ' (the table below lists them all)');
	if (m.heap.binned || m.commit.binned)
		flags.push('big trace: the top stacks keep every lifetime, the rest are bucketed by ' + fmtTime(m.heap.bucketNs));
	$('summary-grid').innerHTML = items
		.map(([k, v]) => '<div class="k">' + esc(k) + '</div><div class="v" data-key="' + esc(k) + '">' + esc(v) + '</div>')
		.join('');
	$('summary-notes').textContent = flags.join('; ');
	$('processes').innerHTML =
		'<tr><th>PID</th><th>Parent</th><th>Program</th><th>Start</th><th>End</th><th>Status</th></tr>' +
		m.processes
			.map((p) => '<tr><td>' + p.pid + '</td><td>' + p.ppid + '</td><td title="' + esc((p.argv || []).join(' ')) + '">' + esc(p.exe || '') +
				'</td><td>' + esc(fmtTime(p.start_ns)) + '</td><td>' + esc(fmtTime(p.end_ns)) + '</td><td>' + esc(p.status || '') + '</td></tr>')
			.join('');
	snapshots(m);
}
