// cedar-wasm side of scripts/bench-cedar: median per-request latency of statefulIsAuthorized with
// pre-parsed policy sets (preparsePolicySet), over the given integration-test files.
// With --schema, each test's schema is pre-parsed too (preparseSchema) and passed by name, as dome gets
// it (entities and context typed by the schema; requests not validated, as in dome's path).
// usage: node bench-wasm.cjs --root DIR --repeat N [--schema] TEST.json...
'use strict';
const path = require('path');
const fs = require('fs');
const { cedar } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));
const args = process.argv.slice(2);
let root = '.', repeat = 20, withSchema = false;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--root') root = args[++i];
  else if (args[i] === '--repeat') repeat = parseInt(args[++i], 10);
  else if (args[i] === '--schema') withSchema = true;
  else files.push(args[i]);
}
const samples = [];
let mismatches = 0, skipped = 0;
files.forEach((file, n) => {
  const test = JSON.parse(fs.readFileSync(file, 'utf8'));
  const text = fs.readFileSync(path.join(root, test.policies), 'utf8');
  const entities = JSON.parse(fs.readFileSync(path.join(root, test.entities), 'utf8'));
  const id = `set${n}`;
  if (cedar.preparsePolicySet(id, { staticPolicies: text }).type !== 'success') { skipped += test.requests.length; return; }
  let schemaName;
  if (withSchema && test.schema) {
    schemaName = `schema${n}`;
    const schemaText = fs.readFileSync(path.join(root, test.schema), 'utf8');
    if (cedar.preparseSchema(schemaName, schemaText).type !== 'success') { skipped += test.requests.length; return; }
  }
  for (const req of test.requests) {
    const call = { principal: req.principal, action: req.action, resource: req.resource, context: req.context,
      preparsedPolicySetId: id, entities };
    if (schemaName) { call.preparsedSchemaName = schemaName; call.validateRequest = false; }
    const first = cedar.statefulIsAuthorized(call);
    if (first.type !== 'success') { skipped++; continue; }
    if (first.response.decision !== req.decision) mismatches++;
    const t0 = process.hrtime.bigint();
    for (let k = 0; k < repeat; k++) cedar.statefulIsAuthorized(call);
    samples.push(Number(process.hrtime.bigint() - t0) / repeat);
  }
});
samples.sort((a, b) => a - b);
const q = (p) => samples.length ? samples[Math.floor(p * (samples.length - 1))] : 0;
console.log(JSON.stringify({ requests: samples.length, repeat, median_ns: Math.round(q(0.5)), p90_ns: Math.round(q(0.9)), skipped, mismatches }));
