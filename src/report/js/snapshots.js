// The snapshots of a heap snapshot trace (record --snapshot): a table of
// each snapshot's time and totals (those of 'heaptrail info'), the one this
// page shows marked, and a link to the page of each other one when
// 'heaptrail report --all-snapshots' wrote them side by side; otherwise the
// command that writes it.

import { fmtBytes, fmtCount, fmtTime, esc } from './format.js';

// One row per snapshot, in the trace's order: what the table shows.
export function snapshotRows(trace) {
	const file = trace.file || 'TRACE.htr';
	return (trace.snapshots || []).map((s) => ({
		number: s.number,
		time: fmtTime(s.ts_ns),
		live: fmtBytes(s.live_bytes) + ' in ' + fmtCount(s.live_count) + ' blocks',
		allocated: fmtBytes(s.alloc_bytes) + ' in ' + fmtCount(s.alloc_count) + ' blocks',
		taken: !s.exit_pid
			? ''
			: s.at_exec
				? 'at the exec of process ' + s.exit_pid + ' (the image exec replaced, its blocks alone)'
				: 'at the exit of process ' + s.exit_pid + ' (its blocks alone)',
		current: s.number === trace.snapshot,
		href: s.page || null,
		command: 'heaptrail report ' + file + ' --snapshot ' + s.number,
	}));
}

export function snapshots(m) {
	const el = document.getElementById('snapshots');
	const rows = snapshotRows(m.trace);
	if (!rows.length) {
		el.style.display = 'none';
		return;
	}
	const num = (r) => (r.current ? '<b>' + r.number + ' (this page)</b>' : r.href ? '<a href="' + esc(r.href) + '">' + r.number + '</a>' : String(r.number));
	el.innerHTML =
		'<tr><th>Snapshot</th><th>Time</th><th>Live</th><th>Allocated since the start</th><th>Taken</th><th>Its page</th></tr>' +
		rows
			.map((r) => '<tr data-snapshot="' + r.number + '"' + (r.current ? ' class="current"' : '') + '><td>' + num(r) + '</td><td>' + esc(r.time) + '</td><td>' + esc(r.live) +
				'</td><td>' + esc(r.allocated) + '</td><td>' + esc(r.taken) + '</td><td>' + (r.current ? '' : r.href ? '<a href="' + esc(r.href) + '">' + esc(r.href) + '</a>' : '<code>' + esc(r.command) + '</code>') + '</td></tr>')
			.join('');
}
