// The Heap Allocations and Commit Lifetimes tables: WPA's grouped, expandable
// tree (Process -> Handle -> Impacting Type -> Stack -> blocks) drawn with
// Tabulator, recomputed from scratch whenever the window changes.

import { Tabulator, SortModule, FormatModule, DataTreeModule, ResizeColumnsModule, TooltipModule, InteractionModule } from 'tabulator-tables';
import { fmtBytes, fmtCount, fmtTime, esc } from './format.js';

Tabulator.registerModule([SortModule, FormatModule, DataTreeModule, ResizeColumnsModule, TooltipModule, InteractionModule]);

const bytesCell = (cell) => esc(fmtBytes(cell.getValue()));
const countCell = (cell) => esc(fmtCount(cell.getValue()));
const timeCell = (cell) => {
	const v = cell.getValue();
	if (v === undefined) return '';
	return v === Infinity ? '<span class="dim">never</span>' : esc(fmtTime(v));
};
const exactBytes = (e, cell) => {
	const v = cell.getValue();
	return typeof v === 'number' ? v.toLocaleString('en-US') + ' bytes' : '';
};

// The tree column: the group's name, and file:line for frames.
function labelCell(cell) {
	const d = cell.getRow().getData();
	let h = '<span class="lbl lbl-' + esc(d.kind) + '">' + esc(d.label) + '</span>';
	if (d.kind === 'block') h = '<span class="lbl lbl-block">' + esc(fmtBytes(d.bytes)) + ' block</span>';
	if (d.where) h += ' <span class="where">' + esc(d.where) + '</span>';
	return h;
}

// The whole name and the full source path, for names cut by the column's width.
const labelTip = (e, cell) => {
	const d = cell.getRow().getData();
	return d.kind === 'block' ? '' : d.label + (d.full ? '\n' + d.full : '');
};

/*
 * Creates a table in el; kind is 'heap' or 'commit' (which names the time
 * columns as WPA does); onPick(rowData) is called when a row is clicked.
 * Returns { update(rows) }.
 */
export function createTreeTable(el, kind, treeTitle, onPick) {
	const allocTitle = kind === 'commit' ? 'Commit Time' : 'Alloc Time';
	const freeTitle = kind === 'commit' ? 'Decommit Time' : 'Free Time';
	const num = { hozAlign: 'right', headerHozAlign: 'right', sorter: 'number', headerSortStartingDir: 'desc', width: 120 };
	// What the user opened or closed, by row path: kept across windows as WPA does.
	const open = new Map();
	const table = new Tabulator(el, {
		data: [],
		dataTree: true,
		dataTreeStartExpanded: (row, level) => {
			const p = row.getData().path;
			return open.has(p) ? open.get(p) : level < 1;
		},
		dataTreeChildIndent: 14,
		layout: 'fitColumns',
		renderVertical: 'basic',
		maxHeight: '520px',
		placeholder: 'nothing in this window',
		initialSort: [{ column: 'size', dir: 'desc' }],
		columns: [
			{ title: treeTitle, field: 'label', formatter: labelCell, minWidth: 320, widthGrow: 4, headerSortStartingDir: 'asc', tooltip: labelTip },
			{ title: 'Type', field: 'type', width: 70 },
			{ title: 'Count', field: 'count', formatter: countCell, ...num, width: 90 },
			{ title: 'Impacting Size', field: 'impacting', formatter: bytesCell, tooltip: exactBytes, ...num },
			{ title: 'Size', field: 'size', formatter: bytesCell, tooltip: exactBytes, ...num },
			{ title: 'Blocks', field: 'live', formatter: countCell, ...num, width: 90, headerTooltip: 'blocks live for at least part of the window' },
			{ title: allocTitle, field: 'alloc', formatter: timeCell, ...num, headerSortStartingDir: 'asc' },
			{ title: freeTitle, field: 'free', formatter: timeCell, ...num, headerSortStartingDir: 'asc' },
		],
	});
	// A click on a row highlights its blocks on the graph, as WPA does.
	let picked = null;
	table.on('rowClick', (e, row) => {
		if (e.target.closest('.tabulator-data-tree-control')) return;
		if (picked) picked.classList.remove('picked');
		picked = row.getElement();
		picked.classList.add('picked');
		if (onPick) onPick(row.getData());
	});
	table.on('dataTreeRowExpanded', (row) => open.set(row.getData().path, true));
	table.on('dataTreeRowCollapsed', (row) => open.set(row.getData().path, false));
	let built = false;
	let pending = null;
	table.on('tableBuilt', () => {
		built = true;
		if (pending) table.replaceData(pending);
		pending = null;
	});
	return {
		table,
		update(rows) {
			if (built) table.replaceData(rows);
			else pending = rows;
		},
	};
}

/*
 * The xperf view's table: top items by a sort key. Rows: { name, so, soc,
 * st, stc, src, frames? } where frames (stacks mode) are shown on expansion.
 */
export function createXperfTable(el) {
	const num = { hozAlign: 'right', headerHozAlign: 'right', sorter: 'number', headerSortStartingDir: 'desc', width: 140 };
	const table = new Tabulator(el, {
		data: [],
		dataTree: true,
		dataTreeStartExpanded: false,
		layout: 'fitColumns',
		renderVertical: 'basic',
		maxHeight: '520px',
		placeholder: 'nothing allocated in this window',
		columns: [
			{ title: 'Stack / Frame / Image', field: 'label', formatter: labelCell, minWidth: 320, widthGrow: 4, headerSort: false },
			{ title: 'Out Size (so)', field: 'so', formatter: bytesCell, tooltip: exactBytes, ...num },
			{ title: 'Out # (soc)', field: 'soc', formatter: countCell, ...num },
			{ title: 'Total Size (st)', field: 'st', formatter: bytesCell, tooltip: exactBytes, ...num },
			{ title: 'Total # (stc)', field: 'stc', formatter: countCell, ...num },
			{ title: 'Realloc # (src)', field: 'src', formatter: countCell, ...num },
		],
	});
	let built = false;
	let pending = null;
	table.on('tableBuilt', () => {
		built = true;
		if (pending) table.replaceData(pending);
		pending = null;
	});
	return {
		table,
		update(rows) {
			if (built) table.replaceData(rows);
			else pending = rows;
		},
	};
}
