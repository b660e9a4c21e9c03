// The flame graph of the window (outstanding bytes at its end, bytes or
// allocations made in it), with d3-flame-graph: callers-first or allocation
// sites first, flame or icicle orientation, and search. It is drawn in a box
// of fixed height that scrolls by itself, so a stack hundreds of frames deep
// (an interpreter's) never pushes the rest of the page down.

import { select } from 'd3-selection';
import flamegraph from 'd3-flame-graph';
import { fmtBytes, fmtCount } from './format.js';

export const CELL_HEIGHT = 18;

/*
 * Creates the flame graph in el, inside the scrolling box. details is the
 * element that shows the hovered frame or the search result. Returns {
 * update(tree, isBytes, inverted), search(term), setInverted(bool), deep(tree) }.
 */
export function createFlame(box, el, details) {
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
			.cellHeight(CELL_HEIGHT)
			.transitionDuration(250)
			.minFrameSize(1)
			.sort(true)
			.inverted(inverted)
			.setDetailsElement(details);
		// Boxes show the function (d.data.name); search looks at the whole
		// frame, module and file:line included. Plain substring search: a
		// frame name is not a regular expression.
		chart.setSearchMatch((d, t) => {
			const name = d.data.full || d.data.name || '';
			return !!t && name.toLowerCase().includes(t.toLowerCase());
		});
		// The tooltip (and the details line on hover): the whole frame.
		chart.setLabelHandler((d) => {
			const total = tree && tree.value ? tree.value : 1;
			return (d.data.full || d.data.name) + ': ' + fmt(d.value) + ' (' + ((100 * d.value) / total).toFixed(2) + '%)';
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
		// The root in view: at the top of an icicle, at the bottom of a flame.
		box.scrollTop = inverted ? 0 : box.scrollHeight;
	}

	return {
		update(t, bytes, inv) {
			tree = t;
			isBytes = bytes;
			inverted = inv;
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
		// Whether tree is taller than the box: then it opens as an icicle, root on top.
		deep(t) {
			return ((t && t.depth) || 0) + 1 > Math.floor(box.clientHeight / CELL_HEIGHT) - 1;
		},
	};
}
