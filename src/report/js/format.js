// Readable units for the report: bytes in powers of 1024, written KiB and
// MiB as every heaptrail command writes them, times since the trace start,
// and counts with separators.

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

// "40 MiB", "1.25 MiB", "512 B"; negative values keep their sign (Impacting Size).
export function fmtBytes(n) {
	if (n === null || n === undefined || Number.isNaN(n)) return '';
	const sign = n < 0 ? '-' : '';
	let v = Math.abs(n);
	let u = 0;
	while (v >= 1024 && u < UNITS.length - 1) {
		v /= 1024;
		u++;
	}
	return sign + trim(v, u === 0 ? 0 : 2) + ' ' + UNITS[u];
}

// Fixed decimals without trailing zeros, so exact sizes read as "40 MiB".
function trim(v, decimals) {
	const s = v.toFixed(decimals);
	return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

// ns since trace start: "2.345 s", "12.5 ms", "800 us", "120 ns".
export function fmtTime(ns) {
	if (ns === null || ns === undefined || !Number.isFinite(ns)) return '';
	const a = Math.abs(ns);
	if (a >= 1e9) return trim(ns / 1e9, 6) + ' s';
	if (a >= 1e6) return trim(ns / 1e6, 3) + ' ms';
	if (a >= 1e3) return trim(ns / 1e3, 3) + ' us';
	return String(ns) + ' ns';
}

// Seconds on the graphs' axis, with as many decimals as the span needs.
export function fmtSeconds(s, span) {
	const d = span >= 10 ? 1 : span >= 1 ? 2 : span >= 0.1 ? 3 : 6;
	return s.toFixed(d) + ' s';
}

export function fmtCount(n) {
	if (n === null || n === undefined || Number.isNaN(n)) return '';
	return Math.round(n).toLocaleString('en-US');
}

// A duration in ns for --range: exact, with the ns suffix heaptrail accepts.
export function rangeArg(ns) {
	return Math.round(ns) + 'ns';
}

// Escapes text for innerHTML (names come from the traced program's symbols).
export function esc(s) {
	return String(s).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}
