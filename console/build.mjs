// Builds the console into the folder hutchd serves under /ui/: esbuild
// bundles src/main.ts (and the CSS it imports: the console's and
// xterm.js's) into content-hashed files under assets/, and index.html is
// written to name them. The type check (tsc --noEmit) runs first.
//   node build.mjs [--outdir DIR] [--no-typecheck]
// Default DIR: ../build/ui (beside build/hutchd, where hutchd looks).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const outIndex = args.indexOf('--outdir');
const outdir = resolve(outIndex >= 0 ? args[outIndex + 1] : join(here, '..', 'build', 'ui'));

if (!args.includes('--no-typecheck')) {
  execFileSync(process.execPath, [join(here, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '-p', here], {
    stdio: 'inherit',
  });
}

// Written beside the target and renamed into place, so a server reading the
// folder never sees half a build.
const stage = `${outdir}.tmp-${process.pid}`;
rmSync(stage, { recursive: true, force: true });
mkdirSync(stage, { recursive: true });
const result = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  minify: true,
  sourcemap: 'linked',
  legalComments: 'linked',
  entryNames: 'assets/[name]-[hash]',
  assetNames: 'assets/[name]-[hash]',
  outdir: stage,
  metafile: true,
  logLevel: 'warning',
});
const outputs = Object.keys(result.metafile.outputs).map((p) => basename(p));
const js = outputs.find((p) => /^main-[A-Z0-9]+\.js$/.test(p));
const css = outputs.find((p) => /^main-[A-Z0-9]+\.css$/.test(p));
if (!js || !css) throw new Error(`build: no main js/css among ${outputs.join(', ')}`);
const html = readFileSync(join(here, 'src', 'index.html'), 'utf8')
  .replace('%CSS%', `/ui/assets/${css}`)
  .replace('%JS%', `/ui/assets/${js}`);
writeFileSync(join(stage, 'index.html'), html);
rmSync(outdir, { recursive: true, force: true });
mkdirSync(dirname(outdir), { recursive: true });
renameSync(stage, outdir);
console.log(`console built into ${outdir}: index.html, assets/${js}, assets/${css}`);
