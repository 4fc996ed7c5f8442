/**
 * The size of the extension's JavaScript as the browser downloads it: every .js file the
 * production build wrote to jupyter_gpu/labextension/static (JupyterLab's shared packages are
 * not in it: the page already has them), each gzipped at level 9. Prints a table, writes
 * test-results/bundle.json, and fails above the budget.
 */
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const BUDGET_BYTES = 300 * 1024;
const dir = path.join(__dirname, '..', 'jupyter_gpu', 'labextension', 'static');
const files = fs.readdirSync(dir).filter(name => name.endsWith('.js'));
if (!files.length) {
  console.error(
    `bundle-size: no .js files in ${dir}; run \`jlpm build:prod\` first`
  );
  process.exit(1);
}
let raw = 0;
let gzipped = 0;
for (const name of files.sort()) {
  const data = fs.readFileSync(path.join(dir, name));
  const gz = zlib.gzipSync(data, { level: 9 }).length;
  raw += data.length;
  gzipped += gz;
  console.log(
    `  ${name.padEnd(36)} ${String(data.length).padStart(8)} B  ${String(gz).padStart(7)} B gzipped`
  );
}
const kb = n => (n / 1024).toFixed(1);
console.log(
  `bundle-size: ${files.length} files, ${kb(raw)} KiB, ${kb(gzipped)} KiB gzipped (budget ${kb(BUDGET_BYTES)} KiB)`
);
fs.mkdirSync(path.join(__dirname, 'test-results'), { recursive: true });
fs.writeFileSync(
  path.join(__dirname, 'test-results', 'bundle.json'),
  JSON.stringify(
    { files: files.length, raw_bytes: raw, gzip_bytes: gzipped },
    null,
    2
  )
);
if (gzipped > BUDGET_BYTES) {
  console.error('bundle-size: over budget');
  process.exit(1);
}
