// Differential-test generator: random Cedar policies (well-formed and, sometimes, mutated into
// ill-formed text), entities and requests, answered by the reference implementation
// @cedar-policy/cedar-wasm. Writes a batch file for build/cedar-conformance:
//   {"tests": [{"policyText", "parseError", "entitiesValue", "requests": [{..., decision, reason, errors}]}]}
//
// usage: node gen.cjs --requests N [--seed S] [--out FILE]
'use strict';
const path = require('path');
const fs = require('fs');
const { cedar, flags, seedFlag, random } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));

const opt = flags();
const wanted = parseInt(opt('--requests', '1000'), 10);
const seed = seedFlag(opt);
const out = opt('--out', '/dev/stdout');

// mulberry32 (cedar-difftest.cjs): a failing seed can be replayed.
const { rand, int, pick, chance } = random(seed);

const TYPES = ['User', 'Group', 'Photo', 'NS::Doc'];
const IDS = ['a', 'b', 'c', '', 'a b', 'ü'];
const ATTRS = ['age', 'name', 'tags', 'owner', 'rec', 'ip', 'level', 'flag', 'a b'];
const STRINGS = ['', 'a', 'ab', 'abc', 'a*c', 'xyz', 'é', 'a\\b', '*', 'hello world'];
const LONGS = [0, 1, -1, 2, 7, 100, -100, 9223372036854775807n, -9223372036854775808n, 4611686018427387904n];
const IPS = ['10.0.0.1', '10.0.0.0/8', '192.168.1.1/24', '127.0.0.1', '::1', 'ff00::1', '224.0.0.1', '1.2.3',
  '::ffff:1.2.3.4', '2001:db8::/32', '0.0.0.0/0', '10.0.0.1/33', '01.2.3.4'];
const DECIMALS = ['1.0', '0.5', '-2.25', '922337203685477.5807', '1.23456', '1', '-0.0001', '3.1'];
const DATETIMES = ['2024-01-01', '2024-01-01T12:30:00Z', '2024-02-29T00:00:00.123Z', '2024-01-01T00:00:00+0100',
  '1970-01-01', '2023-02-29', '2024-13-01', '9999-12-31T23:59:59Z'];
const DURATIONS = ['1d', '2h30m', '-1s', '1ms', '1d2h3m4s5ms', '0ms', '1x', '9223372036854775807ms', '1h1h'];

function uid() {
  return { type: pick(TYPES), id: pick(IDS) };
}
function uidText(u) {
  return `${u.type}::${JSON.stringify(u.id)}`;
}
function strLit(s) {
  return JSON.stringify(s).replace(/\u00e9/g, '\\u{e9}');
}
function longLit(v) {
  return String(v);
}

// Expressions: each generator returns Cedar text.
function gen(depth) {
  if (depth <= 0 || chance(0.25)) return leaf();
  const d = depth - 1;
  switch (int(26)) {
    case 0: return `(${gen(d)} && ${gen(d)})`;
    case 1: return `(${gen(d)} || ${gen(d)})`;
    case 2: return `!${paren(gen(d))}`;
    case 3: return `(if ${gen(d)} then ${gen(d)} else ${gen(d)})`;
    case 4: return `(${gen(d)} ${pick(['==', '!='])} ${gen(d)})`;
    case 5: return `(${gen(d)} ${pick(['<', '<=', '>', '>='])} ${gen(d)})`;
    case 6: return `(${gen(d)} ${pick(['+', '-', '*'])} ${gen(d)})`;
    case 7: return `-${paren(gen(d))}`;
    case 8: return `(${entityish(d)} in ${chance(0.5) ? entityish(d) : `[${entityish(d)}, ${entityish(d)}]`})`;
    case 9: return `(${recordish(d)} has ${pick(ATTRS.map((a) => (a.includes(' ') ? JSON.stringify(a) : a)))})`;
    case 10: return `${recordish(d)}${attrAccess()}`;
    case 11: return `(${stringish(d)} like ${pattern()})`;
    case 12: return `(${entityish(d)} is ${pick(TYPES)}${chance(0.3) ? ` in ${entityish(d)}` : ''})`;
    case 13: return `[${Array.from({ length: int(4) }, () => gen(d)).join(', ')}]`;
    case 14: return `{${Array.from({ length: int(3) }, (_, i) => `${pick(['a', 'b', '"c d"'])}${i}: ${gen(d)}`).join(', ')}}`;
    case 15: return `${setish(d)}.${pick(['contains', 'containsAll', 'containsAny'])}(${chance(0.5) ? setish(d) : gen(d)})`;
    case 16: return `${setish(d)}.isEmpty()`;
    case 17: return `${entityish(d)}.${pick(['getTag', 'hasTag'])}(${chance(0.8) ? strLit(pick(['t', 'u', 'a'])) : gen(d)})`;
    case 18: return `ip(${strLit(pick(IPS))}).${pick(['isIpv4', 'isIpv6', 'isLoopback', 'isMulticast'])}()`;
    case 19: return `ip(${strLit(pick(IPS))}).isInRange(ip(${strLit(pick(IPS))}))`;
    case 20: return `decimal(${strLit(pick(DECIMALS))}).${pick(['lessThan', 'lessThanOrEqual', 'greaterThan', 'greaterThanOrEqual'])}(decimal(${strLit(pick(DECIMALS))}))`;
    case 21: return `(${timeish(d)} ${pick(['<', '<=', '>', '>=', '==', '!='])} ${timeish(d)})`;
    case 22: return `duration(${strLit(pick(DURATIONS))}).${pick(['toDays', 'toHours', 'toMinutes', 'toSeconds', 'toMilliseconds'])}()`;
    case 23: return `principal.${pick(['level', 'age'])} ${pick(['<', '>', '=='])} ${longLit(pick(LONGS))}`;
    case 24: return `(${gen(d)} == ${leaf()})`;
    default: return `context${attrAccess()}`;
  }
}
function paren(t) {
  return `(${t})`;
}
function attrAccess() {
  const a = pick(ATTRS);
  return a.includes(' ') || chance(0.1) ? `[${JSON.stringify(a)}]` : `.${a}`;
}
function leaf() {
  switch (int(9)) {
    case 0: return pick(['true', 'false']);
    case 1: return longLit(pick(LONGS));
    case 2: return strLit(pick(STRINGS));
    case 3: return uidText(uid());
    case 4: return pick(['principal', 'action', 'resource', 'context']);
    case 5: return `${pick(['principal', 'resource', 'context'])}${attrAccess()}`;
    case 6: return pick(['ip("10.0.0.1")', 'decimal("1.5")', 'datetime("2024-01-01")', 'duration("1h")']);
    case 7: return 'context.flag';
    default: return `principal${attrAccess()}`;
  }
}
function entityish(d) {
  return chance(0.7) ? pick(['principal', 'resource', 'action', uidText(uid()), 'principal.owner', 'resource.owner']) : gen(d);
}
function recordish(d) {
  return chance(0.8) ? pick(['principal', 'resource', 'context', 'context.rec', 'principal.rec', '{a: 1, "b c": "x"}']) : gen(d);
}
function stringish(d) {
  return chance(0.8) ? pick(['principal.name', 'context.name', strLit(pick(STRINGS))]) : gen(d);
}
function setish(d) {
  return chance(0.8) ? pick(['principal.tags', 'context.tags', '[1, 2, "a"]', '[]', `[${uidText(uid())}]`]) : gen(d);
}
function timeish(d) {
  if (chance(0.1)) return gen(d);
  if (chance(0.5)) {
    const base = `datetime(${strLit(pick(DATETIMES))})`;
    switch (int(4)) {
      case 0: return base;
      case 1: return `${base}.offset(duration(${strLit(pick(DURATIONS))}))`;
      case 2: return `${base}.${pick(['toDate', 'toTime'])}()`;
      default: return `${base}.durationSince(datetime(${strLit(pick(DATETIMES))}))`;
    }
  }
  return `duration(${strLit(pick(DURATIONS))})`;
}
function pattern() {
  let p = '';
  const n = 1 + int(4);
  for (let i = 0; i < n; i++) p += pick(['a', 'b', '*', '\\*', 'c', ' ', 'é', 'llo']);
  return `"${p}"`;
}

function scope(v) {
  const r = int(6);
  if (v === 'action') {
    if (r === 0) return `action == Action::${JSON.stringify(pick(['view', 'edit']))}`;
    if (r === 1) return `action in [Action::"view", Action::"all"]`;
    if (r === 2) return `action in Action::"all"`;
    return 'action';
  }
  if (r === 0) return `${v} == ${uidText(uid())}`;
  if (r === 1) return `${v} in ${uidText(uid())}`;
  if (r === 2) return `${v} is ${pick(TYPES)}`;
  if (r === 3) return `${v} is ${pick(TYPES)} in ${uidText(uid())}`;
  return v;
}

function policy() {
  let text = chance(0.2) ? '@note("x") ' : '';
  text += `${chance(0.6) ? 'permit' : 'forbid'}(${scope('principal')}, ${scope('action')}, ${scope('resource')})`;
  const conds = chance(0.3) ? 0 : 1 + int(2);
  for (let i = 0; i < conds; i++) text += ` ${chance(0.7) ? 'when' : 'unless'} { ${gen(int(4))} }`;
  return text + ';';
}

function templateText() {
  const p = pick(['principal == ?principal', 'principal in ?principal', 'principal is User in ?principal', 'principal']);
  const r = pick(['resource in ?resource', 'resource == ?resource', 'resource is Photo in ?resource',
    p === 'principal' ? 'resource in ?resource' : 'resource']);
  let text = `${chance(0.7) ? 'permit' : 'forbid'}(${p}, ${scope('action')}, ${r})`;
  if (chance(0.6)) text += ` when { ${gen(int(3))} }`;
  return text + ';';
}

function mutate(text) {
  const i = int(text.length + 1);
  switch (int(3)) {
    case 0: return text.slice(0, i) + text.slice(i + 1);
    case 1: return text.slice(0, i) + pick(['(', ')', '!', '-', '"', ',', '.', '=', '[', '}', ' if ', '::', '?']) + text.slice(i);
    default: return text.slice(0, i) + text.slice(i, i + 3).split('').reverse().join('') + text.slice(i + 3);
  }
}

function value(depth) {
  switch (int(depth > 0 ? 9 : 6)) {
    case 0: return chance(0.5);
    case 1: return Number(pick(LONGS.filter((x) => typeof x === 'number')));
    case 2: return pick(STRINGS);
    case 3: return { __entity: uid() };
    case 4: return { __extn: { fn: 'ip', arg: pick(IPS.slice(0, 7)) } };
    case 5: return { __extn: { fn: 'decimal', arg: pick(DECIMALS.slice(0, 4)) } };
    case 6: return Array.from({ length: int(4) }, () => value(depth - 1));
    case 7: { const o = {}; for (const k of ['a', 'b', 'c d'].slice(0, int(4))) o[k] = value(depth - 1); return o; }
    default: return { __extn: { fn: 'duration', arg: pick(DURATIONS.slice(0, 6)) } };
  }
}

function attrs() {
  const o = {};
  for (const a of ATTRS) if (chance(0.5)) o[a] = value(2);
  if (chance(0.7)) o.tags = Array.from({ length: int(4) }, () => pick(['a', 'b', 1, 'x']));
  if (chance(0.7)) o.owner = { __entity: uid() };
  if (chance(0.7)) o.name = pick(STRINGS);
  return o;
}

function entities() {
  const seen = new Set();
  const list = [];
  const n = 2 + int(6);
  for (let i = 0; i < n; i++) {
    const u = uid();
    const key = uidText(u);
    if (seen.has(key)) continue;
    seen.add(key);
    const e = { uid: u, attrs: attrs(), parents: Array.from({ length: int(3) }, () => uid()) };
    if (chance(0.5)) e.tags = { t: value(1), a: value(0) };
    list.push(e);
  }
  list.push({ uid: { type: 'Action', id: 'view' }, attrs: {}, parents: [{ type: 'Action', id: 'all' }] });
  return list;
}

// Ill-formed entity data: upstream's verdict (checkParseEntities) must match dome's.
function corrupt(ents) {
  const e = ents[int(ents.length - 1)];
  switch (int(10)) {
    case 0: e.attrs.bad = 1.5; break;
    case 1: ents.push(JSON.parse(JSON.stringify(e))); break;
    case 2: e.parents = ['User::"a"']; break;
    case 3: e.attrs.bad = { __extn: { fn: 'ip', arg: pick(['1.2.3', '::ffff:1.2.3.4', '10.0.0.1/33']) } }; break;
    case 4: e.attrs.bad = { __entity: { type: 'User' } }; break;
    case 5: e.uid = { type: pick(['1abc', 'A::', 'if', '']), id: 'x' }; break;
    case 6: e.attrs.bad = null; break;
    case 7: e.extra = 1; break;
    case 8: e.tags = [1]; break;
    default: e.attrs.bad = { __extn: { fn: pick(['decimal', 'nosuch']), arg: pick(['1.23456', 'x', '1.0']) } }; break;
  }
  return ents;
}

// Schema mode: entities written with the implicit forms a schema allows (entity refs as {type,id},
// extension values as strings), sometimes wrong; both sides parse entities and context with the schema.
const SCHEMA = `
entity Group;
entity User in [Group] { age?: Long, name?: String, tags?: Set<String>, owner?: User, ip?: ipaddr,
  level?: Long, flag?: Bool, rec?: { a?: Long, b?: { c?: Bool } }, when?: datetime, amount?: decimal } tags String;
entity Photo in [Group] { owner?: User, name?: String, ip?: ipaddr };
namespace NS { entity Doc in [Group] { owner: User, level?: Long }; }
action all;
action view, edit in [all] appliesTo { principal: [User, Group], resource: [Photo, User, NS::Doc, Group],
  context: { flag?: Bool, name?: String, tags?: Set<Long>, rec?: { a?: Long }, src?: ipaddr } };
`;
function schemaValue(kind) {
  const wrong = chance(0.03);
  switch (kind) {
    case 'Long': return wrong ? 'x' : Number(pick([0, 1, -5, 100]));
    case 'String': return wrong ? 1 : pick(STRINGS);
    case 'Bool': return wrong ? 'true' : chance(0.5);
    case 'User': return wrong ? { type: 'Photo', id: 'a' } : chance(0.5) ? { type: 'User', id: pick(IDS) } : { __entity: { type: 'User', id: pick(IDS) } };
    case 'ipaddr': return wrong ? 'not-ip' : chance(0.5) ? pick(IPS.slice(0, 7)) : { __extn: { fn: 'ip', arg: pick(IPS.slice(0, 7)) } };
    case 'datetime': return wrong ? '2024-13-01' : pick(['2024-01-01', '2024-01-01T12:30:00Z']);
    case 'decimal': return wrong ? '1.23456' : pick(DECIMALS.slice(0, 4));
    case 'Set<String>': return wrong ? [1] : Array.from({ length: int(3) }, () => pick(STRINGS));
    case 'Set<Long>': return Array.from({ length: int(3) }, () => int(5));
    default: return null;
  }
}
function schemaEntities() {
  const list = [];
  const seen = new Set();
  const shapes = {
    User: { age: 'Long', name: 'String', tags: 'Set<String>', owner: 'User', ip: 'ipaddr', level: 'Long', flag: 'Bool',
      when: 'datetime', amount: 'decimal' },
    Photo: { owner: 'User', name: 'String', ip: 'ipaddr' },
    'NS::Doc': { owner: 'User', level: 'Long' },
    Group: {},
  };
  for (let i = 0; i < 2 + int(5); i++) {
    const type = pick(Object.keys(shapes));
    const id = pick(IDS);
    if (seen.has(type + id)) continue;
    seen.add(type + id);
    const attrs = {};
    for (const [a, k] of Object.entries(shapes[type])) if ((type === 'NS::Doc' && a === 'owner') || chance(0.6)) attrs[a] = schemaValue(k);
    if (type === 'User' && chance(0.4)) attrs.rec = { a: 1, b: { c: chance(0.5) } };
    if (chance(0.03)) attrs.undeclared = 1;
    const parents = type === 'Group' ? [] : chance(0.5) ? [{ type: 'Group', id: pick(IDS) }] : [];
    const e = { uid: { type, id }, attrs, parents };
    if (type === 'User' && chance(0.5)) e.tags = { t: chance(0.97) ? pick(STRINGS) : 5 };
    list.push(e);
  }
  return list;
}
function schemaContext() {
  const c = {};
  if (chance(0.5)) c.flag = chance(0.97) ? chance(0.5) : 3;
  if (chance(0.5)) c.name = pick(STRINGS);
  if (chance(0.5)) c.src = chance(0.5) ? pick(IPS.slice(0, 7)) : { __extn: { fn: 'ip', arg: '10.0.0.1' } };
  if (chance(0.3)) c.rec = { a: 2 };
  if (chance(0.3)) c.tags = [1, 2];
  return c;
}

const tests = [];
let produced = 0;
let cases = 0;
while (produced < wanted) {
  const n = 1 + int(4);
  let text = Array.from({ length: n }, policy).join('\n');
  if (chance(0.1)) text = mutate(text);
  const parsed = cedar.checkParsePolicySet({ staticPolicies: text });
  const test = { policyText: text };
  // Policy set as the upstream call sees it; templates and links sometimes.
  const policySet = { staticPolicies: text };
  cases++;
  if (parsed.type !== 'success') {
    test.parseError = true;
    test.requests = [];
    tests.push(test);
    produced++;
    continue;
  }
  if (chance(0.15)) {
    const ttext = templateText();
    if (cedar.checkParsePolicySet({ templates: { t0: ttext } }).type === 'success') {
      const links = [];
      for (let k = 0; k < 1 + int(2); k++) {
        const values = {};
        if (ttext.includes('?principal')) values['?principal'] = uid();
        if (ttext.includes('?resource')) values['?resource'] = uid();
        links.push({ templateId: 't0', newId: `link${k}`, values });
      }
      policySet.templates = { t0: ttext };
      policySet.templateLinks = links;
      test.templates = { t0: ttext };
      test.templateLinks = links;
    }
  }
  // Sometimes hand dome the upstream EST of each policy instead of the text (tests the EST reader).
  // (JS numbers cannot carry longs beyond 2^53 through the EST, so those sets keep the text.)
  if (!policySet.templates && !/\d{16,}/.test(text) && chance(0.25)) {
    const parts = cedar.policySetTextToParts(text);
    if (parts.type === 'success') {
      const st = {};
      let ok = true;
      parts.policies.forEach((ptext, k) => {
        const j = cedar.policyToJson(ptext);
        if (j.type === 'success') st[`policy${k}`] = j.json; else ok = false;
      });
      if (ok) test.policyJson = { staticPolicies: st };
    }
  }
  const schemaMode = !policySet.templates && chance(0.2);
  const ents = schemaMode ? schemaEntities() : entities();
  test.entitiesValue = ents;
  if (schemaMode) test.schemaText = SCHEMA;
  else if (chance(0.05)) corrupt(ents);
  // Upstream refuses some entity sets (ill-formed data, cycles in the parent relation): dome must too.
  if (cedar.checkParseEntities(schemaMode ? { entities: ents, schema: SCHEMA } : { entities: ents }).type !== 'success') {
    test.entitiesError = true;
    test.requests = [];
    tests.push(test);
    produced++;
    continue;
  }
  test.requests = [];
  for (let r = 0; r < 5; r++) {
    const pool = schemaMode ? ents : ents.slice(0, -1);
    const principal = pool.length && chance(0.7) ? pick(pool).uid : uid();
    const resource = pool.length && chance(0.7) ? pick(pool).uid : uid();
    const action = { type: 'Action', id: pick(['view', 'edit']) };
    const context = schemaMode ? schemaContext() : { flag: chance(0.5), name: pick(STRINGS), tags: ['a', 1], rec: { a: 1, b: { c: true } } };
    if (!schemaMode && chance(0.3)) context.n = Number(pick(LONGS.filter((x) => typeof x === 'number')));
    const call = { principal, action, resource, context, policies: policySet, entities: ents };
    if (schemaMode) Object.assign(call, { schema: SCHEMA, validateRequest: false });
    const ans = cedar.isAuthorized(call);
    if (ans.type !== 'success') {
      // a context upstream rejects must be rejected by dome too; other failures are not comparable
      const ctx = cedar.checkParseContext(schemaMode ? { context, schema: SCHEMA, action } : { context });
      if (ctx.type !== 'success') {
        test.requests.push({ description: `request ${r}`, principal, action, resource, context, contextError: true });
        produced++;
      }
      continue;
    }
    test.requests.push({
      description: `request ${r}`, principal, action, resource, context,
      decision: ans.response.decision,
      reason: ans.response.diagnostics.reason,
      errors: ans.response.diagnostics.errors.map((e) => e.policyId),
    });
    produced++;
  }
  tests.push(test);
}
fs.writeFileSync(out, JSON.stringify({ seed: parseInt(opt('--seed', '0'), 10), tests }));
process.stderr.write(`difftest: ${produced} cases (${cases} policy sets, ${tests.filter((t) => t.parseError).length} rejected by the parser, ${tests.filter((t) => t.entitiesError).length} entity sets rejected)\n`);
