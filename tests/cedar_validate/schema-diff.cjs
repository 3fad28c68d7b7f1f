// Differential test of schema parsing (.cedarschema syntax and name resolution) against cedar-wasm's
// checkParseSchema: seed schemas (the shipped Dome schema, the integration tests' schemas) mutated at the
// token level (tokens deleted, duplicated, replaced by keywords, names and punctuation); dome accepts a
// schema exactly when cedar-wasm does.
//
// usage: node schema-diff.cjs --check BUILD/cedar-validate-check --seeds DIR[,DIR...] [--cases N] [--seed S]
// (every *.cedarschema under the DIRs is a seed). Ends with `N passed, N failed`.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');
const { cedar, flags, seedFlag, random } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));

const opt = flags();
const cases = parseInt(opt('--cases', '2000'), 10);
const startSeed = seedFlag(opt);
const show = parseInt(opt('--show', '10'), 10);
const check = opt('--check', null);
const seedDirs = (opt('--seeds', '') || '').split(',').filter((d) => d.length);
if (!check || !seedDirs.length) {
  console.error('usage: node schema-diff.cjs --check PATH --seeds DIR[,DIR...] [--cases N] [--seed S]');
  process.exit(2);
}
const { rand, int, pick } = random(startSeed);

function findSchemas(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) findSchemas(p, out);
    else if (e.name.endsWith('.cedarschema') && fs.statSync(p).size < 20000) out.push(fs.readFileSync(p, 'utf8'));
  }
  return out;
}
const seeds = [];
for (const d of seedDirs) findSchemas(d, seeds);
const TOKENS = ['entity', 'action', 'type', 'namespace', 'in', 'appliesTo', 'principal', 'resource', 'context', 'tags',
  'enum', 'Set', '<', '>', '{', '}', '[', ']', ';', ',', ':', '?', '=', 'Long', 'Bool', 'Boolean', 'String',
  '__cedar::Long', '__cedar::String', 'ipaddr', 'decimal', 'datetime', 'duration', 'Action', 'N::', '::', '"x"',
  'Record', 'Entity', '@doc("d")', 'A', 'B', 'N::A', 'Set<Long>', '{ a: Long }', '"a"?: Long', 'attributes'];
function tokenize(text) {
  return text.match(/"(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|::|\/\/[^\n]*|\s+|./g) || [];
}
function mutate(text) {
  const t = tokenize(text).filter((x) => !/^\s+$/.test(x) && !x.startsWith('//'));
  for (let k = 1 + int(2); k > 0 && t.length; k--) {
    const i = int(t.length);
    const r = int(4);
    if (r === 0) t.splice(i, 1);
    else if (r === 1) t.splice(i, 0, t[i]);
    else t[i] = pick(TOKENS);
  }
  return t.join(' ');
}
const batch = [];
for (let i = 0; i < cases; i++) {
  const text = i % 10 === 0 ? pick(seeds) : mutate(pick(seeds));
  batch.push({ text, expected: cedar.checkParseSchema(text).type === 'success' });
}
const input = batch.map((c) => JSON.stringify({ schema: c.text, policies: '' })).join('\n') + '\n';
const run = spawnSync(check, ['--batch'], { input, maxBuffer: 1 << 30 });
const lines = run.stdout.toString().split('\n').filter((l) => l.length);
let passed = 0, failed = 0, shown = 0, accepted = 0;
batch.forEach((c, i) => {
  const got = lines[i] ? JSON.parse(lines[i]) : { parsed: null, errors: [] };
  if (c.expected) accepted++;
  if (got.parsed === c.expected) return void passed++;
  failed++;
  if (shown++ < show) {
    const wasm = cedar.checkParseSchema(c.text);
    console.log(`DISAGREE: cedar-wasm ${c.expected ? 'accepts' : 'rejects'}, dome ${got.parsed ? 'accepts' : 'rejects'}`);
    console.log('--- schema\n' + c.text.slice(0, 1500));
    console.log('--- cedar-wasm: ' + JSON.stringify(wasm.errors ? wasm.errors.map((e) => e.message) : []).slice(0, 400));
    console.log('--- dome: ' + JSON.stringify(got.errors).slice(0, 400) + '\n');
  }
});
console.log(`schema difftest: seed ${startSeed}, ${cases} schemas from ${seeds.length} seeds (${accepted} accepted by cedar-wasm)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
