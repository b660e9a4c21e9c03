// Bundles the report page into one self-contained HTML template: esbuild
// bundles js/main.js with its npm packages and CSS, and both are put inline
// into template.html. heaptrail report later puts the data at the data marker.
//
//   node build.mjs --modules DIR/node_modules --out report-template.html
//   node build.mjs --modules DIR/node_modules --out page.html --data sample.json
//
// esbuild is loaded from --modules (the build dir's npm ci), so the source
// tree never needs a node_modules of its own.

import { createRequire } from 'node:module';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const opt = (name) => {
	const i = args.indexOf(name);
	return i >= 0 ? args[i + 1] : undefined;
};
const modules = resolve(opt('--modules') || join(here, 'node_modules'));
const out = opt('--out');
const dataFile = opt('--data');
if (!out) {
	console.error('usage: node build.mjs --modules DIR --out FILE [--data JSON]');
	process.exit(2);
}

const require = createRequire(join(modules, 'noop.js'));
const esbuild = require('esbuild');

const result = await esbuild.build({
	entryPoints: [join(here, 'js', 'main.js')],
	bundle: true,
	minify: true,
	format: 'iife',
	target: ['chrome100', 'firefox100'],
	nodePaths: [modules],
	outdir: 'out',
	write: false,
	legalComments: 'none',
	logLevel: 'warning',
});
let js = '';
let css = '';
for (const f of result.outputFiles) {
	if (f.path.endsWith('.js')) js += f.text;
	else if (f.path.endsWith('.css')) css += f.text;
}
// d3-flame-graph does not export its stylesheet, so it is read from its package.
css = readFileSync(join(modules, 'd3-flame-graph', 'dist', 'd3-flamegraph.css'), 'utf8') + '\n' + css;
// Nothing in the inline code may close its element early.
js = js.replace(/<\/script/gi, '<\\/script');
css = css.replace(/<\/style/gi, '<\\/style');

const fill = (text, marker, value) => {
	const parts = text.split(marker);
	if (parts.length !== 2) throw new Error('template: marker ' + marker + ' must appear exactly once');
	return parts[0] + value + parts[1];
};
let html = readFileSync(join(here, 'template.html'), 'utf8');
html = fill(html, '/*@@HEAPTRAIL_CSS@@*/', css);
html = fill(html, '/*@@HEAPTRAIL_JS@@*/', js);
if (dataFile) {
	const data = readFileSync(dataFile, 'utf8').replace(/</g, '\\u003c');
	html = fill(html, '/*@@HEAPTRAIL_DATA@@*/', data);
}
mkdirSync(dirname(resolve(out)), { recursive: true });
writeFileSync(out, html);
