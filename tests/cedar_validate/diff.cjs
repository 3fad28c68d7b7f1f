// Differential test of dome's Cedar validator against the reference @cedar-policy/cedar-wasm:
// random schemas (.cedarschema syntax) and random policies over them (well-typed and ill-typed), validated
// in strict mode by both; the validation passes for dome exactly when it passes for cedar-wasm.
//
// usage: node diff.cjs --check BUILD/cedar-validate-check [--cases N] [--seed S] [--show K]
// Prints each disagreement (seed, schema, policies, both answers; at most --show of them) and ends with
// `N passed, N failed`. Cases whose schema or policies cedar-wasm cannot parse are counted as passed
// only when dome rejects them too.
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const { cedar, flags, seedFlag, random } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));

const opt = flags();
const cases = parseInt(opt('--cases', '2000'), 10);
const startSeed = seedFlag(opt);
const show = parseInt(opt('--show', '5'), 10);
const check = opt('--check', null);
if (!check) {
  console.error('diff.cjs: --check PATH is required');
  process.exit(2);
}

const generator = random(startSeed);
const { rand, int, pick, chance } = generator;

const ATTRS = ['a', 'b', 'c', 'd', 'age', 'name'];
const EXT = ['ipaddr', 'decimal', 'datetime', 'duration'];

// ---------------- schema ----------------
function genType(s, depth) {
  const r = int(depth > 1 ? 8 : 11);
  if (r < 2) return 'Long';
  if (r < 4) return 'String';
  if (r < 5) return 'Bool';
  if (r < 6) return pick(s.entities).name;
  if (r < 7) return pick(EXT);
  if (r < 8) return s.common.length ? pick(s.common) : 'Long';
  if (r < 9) return `Set<${genType(s, depth + 1)}>`;
  return genRecord(s, depth + 1);
}
function genRecord(s, depth) {
  const n = int(3);
  const names = [...ATTRS].sort(() => rand() - 0.5).slice(0, n);
  return `{ ${names.map((a) => `${a}${chance(0.3) ? '?' : ''}: ${genType(s, depth + 1)}`).join(', ')} }`;
}
function genSchema() {
  const s = { ns: chance(0.5) ? 'N' : '', entities: [], actions: [], common: [] };
  const count = 2 + int(3);
  for (let i = 0; i < count; i++) s.entities.push({ name: `E${i}`, parents: [], isEnum: false });
  for (const e of s.entities) {
    for (const p of s.entities) if (chance(0.25)) e.parents.push(p.name);
  }
  if (chance(0.3)) s.entities[count - 1].isEnum = true;
  if (chance(0.4)) s.common.push('T0');
  const lines = [];
  if (s.common.length) lines.push(`type T0 = ${genRecord(s, 1)};`);
  for (const e of s.entities) {
    if (e.isEnum) {
      lines.push(`entity ${e.name} enum ["x", "y"];`);
      continue;
    }
    e.shape = genRecord(s, 0);
    const tags = chance(0.2) ? ` tags ${pick(['String', 'Long'])}` : '';
    lines.push(`entity ${e.name}${e.parents.length ? ` in [${e.parents.join(', ')}]` : ''} ${e.shape}${tags};`);
  }
  const actionCount = 1 + int(3);
  for (let i = 0; i < actionCount; i++) {
    const a = { name: `act${i}` };
    s.actions.push(a);
    const ps = s.entities.filter(() => chance(0.5));
    const rs = s.entities.filter(() => chance(0.5));
    if (!ps.length) ps.push(pick(s.entities));
    if (!rs.length) rs.push(pick(s.entities));
    const group = i > 0 && chance(0.3) ? ` in [act0]` : '';
    if (i === 0 && chance(0.2)) {
      lines.push(`action ${a.name};`);
    } else {
      lines.push(
        `action ${a.name}${group} appliesTo { principal: [${ps.map((e) => e.name).join(', ')}], ` +
          `resource: [${rs.map((e) => e.name).join(', ')}], context: ${genRecord(s, 1)} };`,
      );
    }
  }
  const body = lines.join('\n');
  s.text = s.ns ? `namespace ${s.ns} {\n${body}\n}\n` : body + '\n';
  if (chance(0.25)) {
    // a second namespace referring to the first one's types (qualified, and unqualified through the empty
    // namespace when the first is empty), with its own action
    const e = pick(s.entities).name;
    const ref = s.ns ? `${s.ns}::${e}` : chance(0.5) ? e : `${e}`;
    const ctx = s.common.length && chance(0.5) ? (s.ns ? `${s.ns}::T0` : 'T0') : `{ f: ${ref} }`;
    s.text +=
      `namespace M {\n  entity F0 in [${ref}] { g: ${ref}, h?: Set<${ref}> };\n` +
      `  type C = { k: Long };\n` +
      `  action mact appliesTo { principal: [F0, ${ref}], resource: [F0], context: ${chance(0.5) ? 'C' : ctx} };\n}\n`;
    s.other = true;
  }
  if (s.common.length && chance(0.3)) s.text = s.text.replace(/context: \{[^{}]*\} \};/, 'context: T0 };');
  return s;
}

// ---------------- policies ----------------
function q(s, name) {
  return s.ns ? `${s.ns}::${name}` : name;
}
function uid(s, e) {
  const id = e.isEnum ? pick(['x', 'y', 'z']) : pick(['a', 'b']);
  return `${q(s, e.name)}::"${id}"`;
}
function actionUid(s) {
  if (chance(0.05)) return `${q(s, 'Action')}::"nope"`;
  if (s.other && chance(0.3)) return 'M::Action::"mact"';
  return `${q(s, 'Action')}::"${pick(s.actions).name}"`;
}
function entityExpr(s) {
  if (s.other && chance(0.15)) return pick(['M::F0::"f"', 'principal.g', 'resource.g']);
  const r = int(6);
  if (r === 0) return uid(s, pick(s.entities));
  if (r === 1) return 'resource';
  if (r === 2) return `principal.${pick(ATTRS)}`;
  return 'principal';
}
function leaf(s) {
  const r = int(16);
  switch (r) {
    case 0: return String(int(5));
    case 1: return `"${pick(['', 'a', 'x*'])}"`;
    case 2: return pick(['true', 'false']);
    case 3: return `principal.${pick(ATTRS)}`;
    case 4: return `resource.${pick(ATTRS)}`;
    case 5: return `context.${pick(ATTRS)}`;
    case 6: return `principal.${pick(ATTRS)}.${pick(ATTRS)}`;
    case 7: return entityExpr(s);
    case 8: return `ip("${pick(['10.0.0.1', '10.0.0.0/8', '::1', 'bad'])}")`;
    case 9: return `decimal("${pick(['1.5', '2.0', 'x'])}")`;
    case 10: return `datetime("${pick(['2024-01-01', '2024-01-01T00:00:00Z', 'nope'])}")`;
    case 11: return `duration("${pick(['1h', '2d3m', 'x'])}")`;
    case 12: return `[${leafLit(s)}${chance(0.5) ? ', ' + leafLit(s) : ''}]`;
    case 13: return `{ ${pick(ATTRS)}: ${leafLit(s)} }`;
    case 14: return 'context';
    default: return `resource.${pick(ATTRS)}.${pick(ATTRS)}`;
  }
}
function leafLit(s) {
  return pick([String(int(3)), `"s"`, 'true', uid(s, pick(s.entities)), `principal.${pick(ATTRS)}`]);
}
function expr(s, depth) {
  if (depth <= 0 || chance(0.25)) return leaf(s);
  const a = () => expr(s, depth - 1);
  const r = int(24);
  switch (r) {
    case 0: return `${a()} && ${a()}`;
    case 1: return `${a()} || ${a()}`;
    case 2: return `!(${a()})`;
    case 3: return `(${a()}) == (${a()})`;
    case 4: return `(${a()}) != (${a()})`;
    case 5: return `(${a()}) < (${a()})`;
    case 6: return `(${a()}) + (${a()}) > 1`;
    case 7: return `if ${a()} then ${a()} else ${a()}`;
    case 8: return `${entityExpr(s)} in ${pick([entityExpr(s), `[${entityExpr(s)}]`])}`;
    case 9: return `${pick(['principal', 'resource', 'context'])} has ${pick(ATTRS)}`;
    case 10: return `(${a()}).contains(${a()})`;
    case 11: return `(${a()}).containsAll(${a()})`;
    case 12: return `(${a()}) like "*a*"`;
    case 13: return `${entityExpr(s)} is ${q(s, pick(s.entities).name)}`;
    case 14: return `(${a()}).isInRange(${a()})`;
    case 15: return `(${a()}).lessThan(${a()})`;
    case 16: return `(${a()}).toDays() > 0`;
    case 17: return `(${a()}).isEmpty()`;
    case 18: return `principal.hasTag("k") && principal.getTag("k") == ${a()}`;
    case 19: return `principal has ${pick(ATTRS)} && principal.${pick(ATTRS)} == ${a()}`;
    case 20: return `context has ${pick(ATTRS)} && context.${pick(ATTRS)} == ${a()}`;
    case 21: return `action == ${actionUid(s)}`;
    case 22: return `action in [${actionUid(s)}]`;
    default: return `-(${a()}) == 0`;
  }
}
function scope(s, v) {
  const r = int(6);
  const e = pick(s.entities);
  if (r === 0) return `${v} == ${uid(s, e)}`;
  if (r === 1) return `${v} in ${uid(s, e)}`;
  if (r === 2) return `${v} is ${q(s, e.name)}`;
  if (r === 3) return `${v} is ${q(s, e.name)} in ${uid(s, pick(s.entities))}`;
  return v;
}
function actionScope(s) {
  const r = int(5);
  if (r === 0) return `action == ${actionUid(s)}`;
  if (r === 1) return `action in ${actionUid(s)}`;
  if (r === 2) return `action in [${actionUid(s)}, ${actionUid(s)}]`;
  return 'action';
}
function slotScope(s, v) {
  const slot = `?${v}`;
  const r = int(3);
  if (r === 0) return `${v} == ${slot}`;
  if (r === 1) return `${v} in ${slot}`;
  return `${v} is ${q(s, pick(s.entities).name)} in ${slot}`;
}
function genPolicy(s, template) {
  const conditions = [];
  for (let k = int(3); k > 0; k--) conditions.push(` ${pick(['when', 'unless'])} { ${expr(s, 1 + int(3))} }`);
  const principal = template && chance(0.7) ? slotScope(s, 'principal') : scope(s, 'principal');
  let resource = template && (chance(0.5) || !principal.includes('?')) ? slotScope(s, 'resource') : scope(s, 'resource');
  return `${pick(['permit', 'forbid'])}(${principal}, ${actionScope(s)}, ${resource})${conditions.join('')};`;
}
// Policies as {text (for dome), set (for cedar-wasm)}: static policies, sometimes one template.
function genPolicies(s) {
  const statics = [];
  for (let i = 1 + int(2); i > 0; i--) statics.push(genPolicy(s, false));
  const set = { staticPolicies: statics.join('\n') };
  let text = statics.join('\n');
  if (chance(0.2)) {
    const t = genPolicy(s, true);
    set.templates = { [`policy${statics.length}`]: t };
    text += '\n' + t;
  }
  return { text, set };
}

// ---------------- run ----------------
const chunk = 2000;
let passed = 0, failed = 0, shown = 0, wasmParseFailures = 0, wasmValid = 0, jsonSchemas = 0;
for (let done = 0; done < cases; done += chunk) {
  const batch = [];
  for (let i = 0; i < Math.min(chunk, cases - done); i++) {
    const caseSeed = generator.state();
    const s = genSchema();
    const policies = genPolicies(s);
    let expected;
    const answer = cedar.validate({ schema: s.text, policies: policies.set });
    if (answer.type === 'failure') {
      expected = { parsed: false, valid: false, errors: answer.errors.map((e) => e.message) };
      wasmParseFailures++;
    } else {
      const valid = answer.validationErrors.length === 0;
      if (valid) wasmValid++;
      expected = { parsed: true, valid, errors: answer.validationErrors.map((e) => `${e.policyId}: ${e.error.message}`) };
    }
    // sometimes hand dome the JSON form of the schema (cedar-wasm's translation) to test that parser too
    let schemaText = s.text, schemaIsJson = false;
    if (chance(0.3)) {
      const j = cedar.schemaToJson(s.text);
      if (j.type === 'success') (schemaText = JSON.stringify(j.json)), (schemaIsJson = true), jsonSchemas++;
    }
    batch.push({ seed: caseSeed, schema: schemaText, schemaIsJson, policies: policies.text, expected });
  }
  const input =
    batch.map((c) => JSON.stringify({ schema: c.schema, schemaIsJson: c.schemaIsJson, policies: c.policies })).join('\n') +
    '\n';
  if (process.env.DIFF_DUMP) require('fs').writeFileSync(process.env.DIFF_DUMP, input);
  const run = spawnSync(check, ['--batch'], { input, maxBuffer: 1 << 30 });
  const lines = run.stdout.toString().split('\n').filter((l) => l.length);
  if (run.status !== 0 || lines.length !== batch.length) {
    console.log(`checker failed (status ${run.status}, ${lines.length}/${batch.length} answers): ${run.stderr}`);
    failed += batch.length;
    continue;
  }
  batch.forEach((c, i) => {
    const got = JSON.parse(lines[i]);
    const same = c.expected.parsed ? got.parsed && got.valid === c.expected.valid : !got.parsed;
    if (same) {
      passed++;
      return;
    }
    failed++;
    if (shown++ < show) {
      console.log(`DISAGREE (case seed ${c.seed}): cedar-wasm ${c.expected.parsed ? (c.expected.valid ? 'valid' : 'invalid') : 'parse error'}, dome ${got.parsed ? (got.valid ? 'valid' : 'invalid') : 'parse error'}`);
      console.log('--- schema\n' + c.schema + '--- policies\n' + c.policies);
      console.log('--- cedar-wasm: ' + JSON.stringify(c.expected.errors));
      console.log('--- dome: ' + JSON.stringify(got.errors) + '\n');
    }
  });
}
console.log(`validation difftest: seed ${startSeed}, ${cases} cases (cedar-wasm: ${wasmValid} valid, ${wasmParseFailures} parse errors; ${jsonSchemas} schemas given to dome in JSON form)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
