// The flame graph of the window (outstanding bytes at its end, bytes or
// allocations made in it), with d3-flame-graph: callers-first or allocation
// sites first, flame or icicle orientation, and search.

import { select } from 'd3-selection';
import flamegraph from 'd3-flame-graph';
import { fmtBytes, fmtCount } from './format.js';

/*
 * Creates the flame graph in el. details is the element that shows the
 * hovered frame or the search result. Returns { update(tree, isBytes),
 * search(term), setInverted(bool) }.
 */
export function createFlame(el, details) {
	let isBytes = true;
	let chart = null;
	let tree = null;
	let inverted = false;
	let term = '';
	const fmt = (v) => (isBytes ? fmtBytes(v) : fmtCount(v) + ' allocations');

	function make() {
		el.textContent = '';
		chart = flamegraph()
			.width(Math.max(el.clientWidth, 400))
			.cellHeight(18)
			.transitionDuration(250)
			.minFrameSize(1)
			.sort(true)
			.inverted(inverted)
			.setDetailsElement(details);
		// Plain substring search: a frame name is not a regular expression.
		chart.setSearchMatch((d, t) => {
			const name = d.data.name || '';
			return !!t && name.toLowerCase().includes(t.toLowerCase());
		});
		chart.setLabelHandler((d) => {
			const total = tree && tree.value ? tree.value : 1;
			return d.data.name + ': ' + fmt(d.value) + ' (' + ((100 * d.value) / total).toFixed(2) + '%)';
		});
		chart.setSearchHandler((results, sum, total) => {
			details.textContent = term ? 'search "' + term + '": ' + fmt(sum) + ' of ' + fmt(total) : '';
		});
	}

	function draw() {
		make();
		if (!tree || !tree.value) {
			el.innerHTML = '<p class="dim">nothing to show in this window</p>';
			return;
		}
		select(el).datum(tree).call(chart);
		if (term) chart.search(term);
	}

	return {
		update(t, bytes) {
			tree = t;
			isBytes = bytes;
			draw();
		},
		search(t) {
			term = t.trim();
			if (!chart || !tree || !tree.value) return;
			if (term) chart.search(term);
			else {
				chart.clear();
				details.textContent = '';
			}
		},
		setInverted(v) {
			inverted = v;
			draw();
		},
	};
}
