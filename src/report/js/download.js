// What the page's download buttons write, as the command line writes it:
// the selected window's heap stacks as collapsed stacks (the text of
// 'heaptrail export --format collapsed -range T1 T2') and as CSV (the text of
// 'heaptrail analyze -stacks -range T1 T2 --format csv'), and the graphs as
// one SVG file.

import { fmtBytes, fmtSeconds, esc } from './format.js';

/*
 * The heap stacks of window [t1, t2) as 'heaptrail analyze -stacks -range'
 * counts them (aggregate.c): a block allocated inside counts in total (st,
 * stc, src), and in outstanding (so, soc) when the program did not free it
 * before t2. A block its process still held at exit (or exec) was never
 * freed by the program: analyze counts it outstanding, where the window
 * tables see it end with the process (the data's "exit" column; a binned
 * cell does not keep it: its blocks count as freed then). One row per stack text, as analyze
 * groups them (two call sites of one function are one frame there), in
 * analyze's order (cmp_groups): so, then st, largest first, then the frames
 * innermost first by their text, a shorter stack first on a tie. Rows: {
 * frames (frame ids, innermost first), names, so, soc, st, stc, src }.
 */
export function windowStacks(m, t1, t2) {
	const tab = m.heap;
	const it = tab.items;
	const bySite = new Map();
	for (let i = 0; i < it.n; i++) {
		const a = it.alloc[i];
		if (!(a >= t1 && a < t2)) continue;
		const s = it.site[i];
		const f = i < it.exactCount && it.exit[i] ? Infinity : it.free[i];
		let r = bySite.get(s);
		if (!r) bySite.set(s, (r = { so: 0, soc: 0, st: 0, stc: 0, src: 0 }));
		r.st += it.bytes[i];
		r.stc += it.count[i];
		r.src += it.reallocs[i];
		if (f >= t2) {
			r.so += it.bytes[i];
			r.soc += it.count[i];
		}
	}
	const byText = new Map();
	for (const [s, r] of bySite) {
		const frames = (m.stacks[tab.sites.stack[s]] || []).slice().reverse();
		const names = frames.map((f) => m.frames.names[f]);
		const key = names.join('\n');
		const row = byText.get(key);
		if (!row) byText.set(key, Object.assign({ frames, names }, r));
		else for (const k of ['so', 'soc', 'st', 'stc', 'src']) row[k] += r[k];
	}
	// Frame texts compare by UTF-16 code units, strcmp's byte order for
	// everything but characters beyond the Basic Multilingual Plane.
	const cmpNames = (a, b) => {
		for (let i = 0; i < a.length && i < b.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
		return a.length - b.length;
	};
	return [...byText.values()].sort((a, b) => b.so - a.so || b.st - a.st || cmpNames(a.names, b.names));
}

/*
 * 'heaptrail export --format collapsed' (src/analysis/export.c): per stack
 * with outstanding bytes, its functions root first joined by ';' (without
 * the 'module!' prefix; ';' and line breaks in a name become '_'), a space,
 * the bytes. A stack without frames is "[no stack]".
 */
export function collapsedText(m, rows) {
	let out = '';
	for (const r of rows) {
		if (!r.so) continue;
		const fs = r.frames.slice().reverse().map((f) => m.frames.short[f].replace(/[;\n\r]/g, '_'));
		out += (fs.length ? fs.join(';') : '[no stack]') + ' ' + r.so + '\n';
	}
	return out;
}

// A CSV field as src/cli/common.c's csv_field() writes it.
function csvField(s) {
	return /[,"\n\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

// 'heaptrail analyze -stacks --format csv': the five metrics, then the stack
// innermost first joined by ' <- '.
export function csvText(rows) {
	let out = 'outstanding_bytes,outstanding_count,total_bytes,total_count,realloc_count,stack\n';
	for (const r of rows) out += [r.so, r.soc, r.st, r.stc, r.src].join(',') + ',' + csvField(r.names.join(' <- ')) + '\n';
	return out;
}

// Text for SVG: XML's five characters escaped, control bytes (which XML 1.0
// cannot hold) written as \xHH, as heaptrail writes them everywhere.
export function xmlText(s) {
	return esc(String(s).replace(/[\u0000-\u001f\u007f]/g, (c) => '\\x' + c.charCodeAt(0).toString(16).padStart(2, '0')));
}

/*
 * The graphs (specs as main.js gives them to charts.js: { id, title,
 * series: [{ label, values, colorOf }] }) as one SVG document: one plot
 * under the other, each with its title, axes, a step line per series (the
 * largest value of each point, as on the page), its legend, and the
 * selected window [t1, t2) shaded.
 */
export function chartsSvg(specs, series, durationNs, t1, t2, colorOf) {
	const W = 1000;
	const L = 90;
	const R = 20;
	const PH = 180;
	const pw = W - L - R;
	const n = series.count;
	const w = series.bucket_ns;
	const span = durationNs / 1e9 || 1e-9;
	const xOf = (ns) => L + (Math.min(Math.max(ns, 0), durationNs) / 1e9 / span) * pw;
	const parts = [];
	let y = 10;
	for (const spec of specs) {
		if (!spec.series.length) continue;
		let top = 0;
		for (const s of spec.series) for (const v of s.values) if (v > top) top = v;
		top = top || 1;
		const legendRows = Math.ceil(spec.series.length / 3);
		const T = y + 24 + legendRows * 16;
		parts.push('<g class="chart" data-chart="' + xmlText(spec.id) + '">');
		parts.push('<text class="title" x="' + W / 2 + '" y="' + (y + 16) + '" text-anchor="middle" font-weight="bold">' + xmlText(spec.title) + '</text>');
		spec.series.forEach((s, i) => {
			const lx = L + (i % 3) * 300;
			const ly = y + 36 + Math.floor(i / 3) * 16;
			parts.push('<rect x="' + lx + '" y="' + (ly - 8) + '" width="14" height="4" fill="' + colorOf(s.color ?? i) + '"/>');
			parts.push('<text class="legend" x="' + (lx + 20) + '" y="' + ly + '">' + xmlText(s.label) + '</text>');
		});
		if (!(t1 <= 0 && t2 > durationNs)) {
			const a = xOf(t1);
			parts.push('<rect class="window" x="' + a.toFixed(1) + '" y="' + T + '" width="' + Math.max(xOf(t2) - a, 1).toFixed(1) + '" height="' + PH + '" fill="rgba(30,100,230,0.15)"/>');
		}
		parts.push('<line x1="' + L + '" y1="' + (T + PH) + '" x2="' + (L + pw) + '" y2="' + (T + PH) + '" stroke="black"/>');
		parts.push('<line x1="' + L + '" y1="' + T + '" x2="' + L + '" y2="' + (T + PH) + '" stroke="black"/>');
		for (let k = 0; k <= 4; k++) {
			const ty = T + PH - (k / 4) * PH;
			parts.push('<text x="' + (L - 6) + '" y="' + (ty + 4).toFixed(1) + '" text-anchor="end" font-size="11">' + xmlText(fmtBytes((top * k) / 4)) + '</text>');
			const tx = L + (k / 4) * pw;
			parts.push('<text x="' + tx.toFixed(1) + '" y="' + (T + PH + 16) + '" text-anchor="middle" font-size="11">' + xmlText(fmtSeconds((span * k) / 4, span)) + '</text>');
		}
		spec.series.forEach((s, i) => {
			// A step line: each point holds its value over its slice of time.
			let d = '';
			for (let p = 0; p < n; p++) {
				const v = s.values[p] ?? 0;
				const py = (T + PH - (v / top) * PH).toFixed(1);
				const x0 = xOf(p * w).toFixed(1);
				const x1 = xOf((p + 1) * w).toFixed(1);
				d += (p ? 'L' : 'M') + x0 + ' ' + py + 'L' + x1 + ' ' + py;
			}
			parts.push('<path class="series" data-label="' + xmlText(s.label) + '" fill="none" stroke="' + colorOf(s.color ?? i) + '" stroke-width="1.5" d="' + d + '"/>');
		});
		parts.push('</g>');
		y = T + PH + 30;
	}
	return (
		'<?xml version="1.0" encoding="UTF-8"?>\n' +
		'<svg xmlns="http://www.w3.org/2000/svg" width="' + W + '" height="' + y + '" viewBox="0 0 ' + W + ' ' + y + '" font-family="sans-serif" font-size="12">\n' +
		'<rect width="100%" height="100%" fill="white"/>\n' +
		parts.join('\n') +
		'\n</svg>\n'
	);
}

// Saves text as a file named name, through a link the browser downloads.
export function saveText(name, text, type) {
	const url = URL.createObjectURL(new Blob([text], { type }));
	const a = document.createElement('a');
	a.href = url;
	a.download = name;
	document.body.appendChild(a);
	a.click();
	a.remove();
	setTimeout(() => URL.revokeObjectURL(url), 10000);
}
