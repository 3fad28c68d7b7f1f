// Differential test of the extension constructors' accepted spellings (ip, decimal, datetime, duration)
// against cedar-wasm: strict validation checks every constructor literal, so `ip("S")` validates exactly
// when S is an ipaddr upstream accepts. Random and mutated strings for each constructor.
//
// usage: node ext-diff.cjs --check BUILD/cedar-validate-check [--cases N] [--seed S] [--show K]
// Ends with `N passed, N failed`.
'use strict';
const path = require('path');
const { spawnSync } = require('child_process');
const { cedar, flags, seedFlag, random } = require(path.join(__dirname, '..', 'node', 'cedar-difftest.cjs'));

const opt = flags();
const cases = parseInt(opt('--cases', '4000'), 10);
const startSeed = seedFlag(opt);
const show = parseInt(opt('--show', '10'), 10);
const check = opt('--check', null);
if (!check) {
  console.error('ext-diff.cjs: --check PATH is required');
  process.exit(2);
}
const { rand, int, pick, chance } = random(startSeed);

const SAMPLES = {
  ip: ['10.0.0.1', '192.168.1.0/24', '::1', 'ffee::/64', '1:2:3:4:5:6:7:8', '::ffff:ff00:1', '0.0.0.0/0', '2001:db8::1/128',
    '255.255.255.255/32', 'fe80::', '1::'],
  decimal: ['1.0', '-2.25', '922337203685477.5807', '-922337203685477.5808', '0.0001', '12.3400', '007.5'],
  datetime: ['2024-10-15', '2024-10-15T11:38:02Z', '2024-10-15T11:38:02.101Z', '2024-10-15T11:38:02.101+1134',
    '2024-02-29T23:59:59-2359', '0000-01-01', '9999-12-31T23:59:59.999Z', '1969-12-31T23:59:59Z'],
  duration: ['1d2h3m4s5ms', '-2h', '10ms', '1m1ms', '0d', '9223372036854775807ms', '-9223372036854775808ms',
    '106751991167d', '1h30m'],
};
const ALPHABET = {
  ip: '0123456789abcdefABCDEF:./x% +-',
  decimal: '0123456789.-+e ',
  datetime: '0123456789-T:.Z+ z',
  duration: '0123456789dhms-+. ',
};
function mutate(s, alphabet) {
  let out = s;
  for (let k = 1 + int(3); k > 0; k--) {
    const i = int(out.length + 1);
    const r = int(3);
    if (r === 0) out = out.slice(0, i) + pick(alphabet) + out.slice(i);
    else if (r === 1) out = out.slice(0, i) + out.slice(i + 1);
    else out = out.slice(0, i) + pick(alphabet) + out.slice(i + 1);
  }
  return out;
}
function randomDate() {
  const pad = (n, w) => String(n).padStart(w, '0');
  let s = `${pad(int(10000), 4)}-${pad(int(14), 2)}-${pad(int(33), 2)}`;
  if (chance(0.7)) {
    s += `T${pad(int(26), 2)}:${pad(int(62), 2)}:${pad(int(62), 2)}`;
    if (chance(0.4)) s += `.${pad(int(1000), 3)}`;
    s += chance(0.5) ? 'Z' : `${pick(['+', '-'])}${pad(int(26), 2)}${pad(int(62), 2)}`;
  }
  return s;
}
function randomDuration() {
  let s = chance(0.3) ? '-' : '';
  for (const unit of ['d', 'h', 'm', 's', 'ms']) if (chance(0.5)) s += String(int(chance(0.1) ? 1e15 : 100)) + unit;
  return s || '0ms';
}
function literal(kind) {
  const r = int(4);
  if (r === 0) return pick(SAMPLES[kind]);
  if (r === 1 && kind === 'datetime') return randomDate();
  if (r === 1 && kind === 'duration') return randomDuration();
  if (r === 2) {
    let s = '';
    for (let k = 1 + int(16); k > 0; k--) s += pick(ALPHABET[kind]);
    return s;
  }
  return mutate(pick(SAMPLES[kind]), ALPHABET[kind]);
}

const schema = 'entity E; action a appliesTo { principal: E, resource: E };';
const fn = { ip: 'ip', decimal: 'decimal', datetime: 'datetime', duration: 'duration' };
const batch = [];
for (let i = 0; i < cases; i++) {
  const kind = pick(Object.keys(fn));
  const text = literal(kind);
  const policy = `permit(principal, action, resource) when { ${fn[kind]}(${JSON.stringify(text)}) == ${fn[kind]}(${JSON.stringify(text)}) };`;
  const a = cedar.validate({ schema, policies: { staticPolicies: policy } });
  const expected = a.type === 'success' && a.validationErrors.length === 0;
  batch.push({ kind, text, policy, expected });
}
const input = batch.map((c) => JSON.stringify({ schema, policies: c.policy })).join('\n') + '\n';
const run = spawnSync(check, ['--batch'], { input, maxBuffer: 1 << 30 });
const lines = run.stdout.toString().split('\n').filter((l) => l.length);
let passed = 0, failed = 0, shown = 0, accepted = 0;
batch.forEach((c, i) => {
  const got = lines[i] ? JSON.parse(lines[i]).valid : null;
  if (c.expected) accepted++;
  if (got === c.expected) return void passed++;
  failed++;
  if (shown++ < show) console.log(`DISAGREE ${c.kind}(${JSON.stringify(c.text)}): cedar-wasm ${c.expected ? 'accepts' : 'rejects'}, dome ${got ? 'accepts' : 'rejects'}`);
});
console.log(`extension literal difftest: seed ${startSeed}, ${cases} literals (${accepted} accepted by cedar-wasm)`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
