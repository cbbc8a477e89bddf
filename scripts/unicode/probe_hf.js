// probe_hf.js — ask Hugging Face's own `tokenizers` library (npm package,
// Rust with a native binary) how it classifies and normalises every Unicode
// scalar value, and print the answers as one JSON object on stdout.
//
// Run by scripts/unicode/gen_tables.py, which turns the answers into
// src/text/unicode_data.c and tests/data/unicode_classes.txt; nothing here
// is used at build or run time.
//
//   node scripts/unicode/probe_hf.js > facts.json
//
// The library comes from tests/hf/node_modules (scripts/install-deps.sh
// installs it there; `npm install --prefix tests/hf` does too) or from
// $GEPARD_HF_NODE_MODULES.
//
// What it asks, all through public API calls:
//  - regex classes: a Split pre-tokenizer with behavior Removed and pattern
//    \p{Lu}, \p{Ll}, ... (Oniguruma, as HF compiles Split patterns) over a
//    string of all scalar values; the code points missing from the pieces are
//    the members;
//  - NFD of every code point (the library's own tables; one call per 20,000
//    code points, separated by spaces, which never combine);
//  - which code points have a non-zero canonical combining class: NFD of
//    "U+0345 c" (class 240 before c) and "c U+0334" (class 1 after c)
//    reorders exactly when c's class is non-zero;
//  - the order of the classes: NFD of "x y" for every pair of such marks
//    swaps them exactly when class(x) > class(y);
//  - which decomposable code points NFC recomposes: NFC(NFD(c)) == c.
'use strict';
const path = require('path');

const modules = process.env.GEPARD_HF_NODE_MODULES ||
    path.join(__dirname, '..', '..', 'tests', 'hf', 'node_modules');
const hf = require(path.join(modules, 'tokenizers'));
const hfVersion = require(path.join(modules, 'tokenizers', 'package.json')).version;

const scalars = [];
for (let c = 0; c <= 0x10ffff; c++)
    if (c < 0xd800 || c > 0xdfff) scalars.push(c);

function stringOf(cps) {
    const parts = [];
    for (let i = 0; i < cps.length; i += 50000)
        parts.push(String.fromCodePoint(...cps.slice(i, i + 50000)));
    return parts.join('');
}

function removedSplitter(pattern) {
    const json = {
        version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
        pre_tokenizer: {type: 'Split', pattern: {Regex: pattern}, behavior: 'Removed', invert: false},
        post_processor: null, decoder: null,
        model: {type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
                end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, vocab: {}, merges: []},
    };
    return hf.Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
}

const allText = stringOf(scalars);

// Members of a class as sorted [first, last] ranges. Piece offsets are in
// code points.
function classRanges(pattern) {
    const member = new Uint8Array(scalars.length).fill(1);
    for (const [, [a, b]] of removedSplitter(pattern).preTokenizeString(allText))
        member.fill(0, a, b);
    const ranges = [];
    for (let i = 0; i < scalars.length; i++) {
        if (!member[i]) continue;
        const c = scalars[i];
        const last = ranges[ranges.length - 1];
        if (last && last[1] === c - 1) last[1] = c;
        else ranges.push([c, c]);
    }
    return ranges;
}

// Normalise many short strings (none containing a space) in few calls.
function normalizeAll(normalizer, strings) {
    const out = [];
    const step = 20000;
    for (let i = 0; i < strings.length; i += step) {
        const chunk = strings.slice(i, i + step);
        const res = normalizer.normalizeString(chunk.join(' ')).split(' ');
        if (res.length !== chunk.length) throw new Error('a separator combined with a neighbour');
        for (const r of res) out.push(r);
    }
    return out;
}

const cpsOf = (s) => Array.from(s, (ch) => ch.codePointAt(0));

const CATEGORIES = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd',
                    'Ps', 'Pe', 'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc',
                    'Cf', 'Co', 'Cn'];
const EXTRA = {White_Space: '\\p{White_Space}', Alphabetic: '\\p{Alphabetic}', s: '\\s', d: '\\d',
               w: '\\w', h: '\\h', w_in_class: '[\\w]'};

const facts = {hf_tokenizers_version: hfVersion, categories: {}, properties: {}};
for (const gc of CATEGORIES) facts.categories[gc] = classRanges(`\\p{${gc}}`);
for (const [name, pattern] of Object.entries(EXTRA)) facts.properties[name] = classRanges(pattern);

// Normalisation.
const nfd = hf.nfdNormalizer();
const nfc = hf.nfcNormalizer();
const probe = scalars.filter((c) => c !== 0x20);
const chars = probe.map((c) => String.fromCodePoint(c));
const decomposed = normalizeAll(nfd, chars);
facts.nfd = {};
for (let i = 0; i < chars.length; i++)
    if (decomposed[i] !== chars[i]) facts.nfd[probe[i]] = cpsOf(decomposed[i]);

const after240 = normalizeAll(nfd, chars.map((ch) => '\u0345' + ch));
const before1 = normalizeAll(nfd, chars.map((ch) => ch + '\u0334'));
const marks = [];
for (let i = 0; i < chars.length; i++) {
    if (probe[i] in facts.nfd) continue;
    if (after240[i] !== '\u0345' + chars[i] || before1[i] !== chars[i] + '\u0334')
        marks.push(probe[i]);
}
facts.nonzero_ccc = marks;

// greater[i][j] = 1 when class(marks[i]) > class(marks[j]).
const pairs = [];
for (const x of marks)
    for (const y of marks) pairs.push(String.fromCodePoint(x) + String.fromCodePoint(y));
const ordered = normalizeAll(nfd, pairs);
facts.ccc_greater = [];
let k = 0;
for (let i = 0; i < marks.length; i++) {
    let row = '';
    for (let j = 0; j < marks.length; j++, k++) row += ordered[k] === pairs[k] ? '0' : '1';
    facts.ccc_greater.push(row);
}

const decomposable = Object.keys(facts.nfd).map(Number);
const recomposed = normalizeAll(nfc, decomposable.map((c) => String.fromCodePoint(...facts.nfd[c])));
facts.recomposes = decomposable.filter((c, i) => recomposed[i] === String.fromCodePoint(c));

process.stdout.write(JSON.stringify(facts));
