// Shared by the Cedar differential tests and benchmarks (tests/cedar_validate/*.cjs, tests/difftest/*.cjs):
// the reference implementation, their command-line flags and the seeded generator that makes a failing
// case replayable from its seed.
'use strict';
const path = require('path');

// @cedar-policy/cedar-wasm (tests/node/package.json pins the version).
const cedar = require(path.join(__dirname, 'node_modules', '@cedar-policy', 'cedar-wasm', 'nodejs'));

// A reader of `--name VALUE` flags in argv (the program's arguments by default): opt(name, def) is the word
// after the first `name`, or `def` when `name` is absent.
function flags(argv = process.argv.slice(2)) {
  return (name, def) => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : def;
  };
}

// The `--seed S` flag as an unsigned 32-bit number; without it one from the clock (0 to 999999).
function seedFlag(opt) {
  return parseInt(opt('--seed', String(Date.now() % 1000000)), 10) >>> 0;
}

// mulberry32 from `seed`: a small deterministic generator. rand() is in [0, 1), int(n) in [0, n), pick(a) an
// element of a, chance(p) true with probability p; state() is the seed the next draw starts from (a
// generator made from it draws the same from there on).
function random(seed) {
  let state = seed >>> 0;
  function rand() {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  const int = (n) => Math.floor(rand() * n);
  const pick = (a) => a[int(a.length)];
  const chance = (p) => rand() < p;
  return { rand, int, pick, chance, state: () => state };
}

module.exports = { cedar, flags, seedFlag, random };
