// Validation benchmark: the corpus policy sets and schemas of cedar-integration-tests validated by dome
// (cedar-validate-check --batch: parse schema + parse policies + validate, one process for all) and by
// cedar-wasm's validate (same inputs, same process loop). Prints the mean time per policy set of each
// and the ratio.
//
// usage: node bench.cjs --check BUILD/cedar-validate-check --corpus DIR [--limit N]
//   DIR holds the unpacked corpus-tests/ (*.cedar and *.cedarschema pairs).
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { cedar, flags } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));

const opt = flags();
const check = opt('--check', null);
const corpus = opt('--corpus', null);
const limit = parseInt(opt('--limit', '100000'), 10);
if (!check || !corpus) {
  console.error('usage: node bench.cjs --check BUILD/cedar-validate-check --corpus DIR [--limit N]');
  process.exit(2);
}
const dir = path.join(corpus, 'corpus-tests');
const cases = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.cedarschema'))
  .slice(0, limit)
  .map((f) => {
    const base = path.join(dir, f.slice(0, -'.cedarschema'.length));
    return { schema: fs.readFileSync(base + '.cedarschema', 'utf8'), policies: fs.readFileSync(base + '.cedar', 'utf8') };
  });

let t0 = process.hrtime.bigint();
let wasmValid = 0;
const wasmAnswers = [];
for (const c of cases) {
  const a = cedar.validate({ schema: c.schema, policies: { staticPolicies: c.policies } });
  const valid = a.type === 'success' && a.validationErrors.length === 0;
  wasmAnswers.push(valid);
  if (valid) wasmValid++;
}
const wasmNs = Number(process.hrtime.bigint() - t0);

const input = cases.map((c) => JSON.stringify(c)).join('\n') + '\n';
t0 = process.hrtime.bigint();
const run = spawnSync(check, ['--batch'], { input, maxBuffer: 1 << 30 });
const domeNs = Number(process.hrtime.bigint() - t0);
const domeAnswers = run.stdout
  .toString()
  .split('\n')
  .filter((l) => l.length)
  .map((l) => JSON.parse(l).valid);
const domeValid = domeAnswers.filter((v) => v).length;
const disagreements = domeAnswers.filter((v, i) => v !== wasmAnswers[i]).length;

const perUs = (ns) => (ns / cases.length / 1000).toFixed(1);
console.log(`validation of ${cases.length} corpus policy sets (schema parse + policy parse + strict validation):`);
console.log(`  cedar-wasm: ${perUs(wasmNs)} us per set (${wasmValid} valid)`);
console.log(`  dome:       ${perUs(domeNs)} us per set (${domeValid} valid; one process, includes JSON I/O)`);
console.log(`  ratio:      dome is ${(wasmNs / domeNs).toFixed(1)}x faster`);
console.log(`  verdicts:   ${disagreements} disagreements between dome and cedar-wasm`);
