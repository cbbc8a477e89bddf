// hf_ids.js — the reference side of the differential tokenizer test
// (tests/test_tokenizer_hf.c): builds a corpus, encodes it with Hugging
// Face's own `tokenizers` library (npm, Rust native binary) and writes the
// texts with HF's ids and NFC output for the C side to compare.
//
//   node tests/hf/hf_ids.js --tokenizer IN.json [--variant NAME]
//        [--write-tokenizer OUT.json] --corpus suite|sweep [--from HEX --to HEX]
//        [--sweep-step N --sweep-offset K] [--stats 1] --out FILE
//
// --variant edits the tokenizer.json before use (the edited file is written
// to --write-tokenizer, so both sides load the same JSON):
//   qwen35          the Split regex replaced by Qwen3.5's (MODEL.md §G.5)
//   split-sequence  three Splits before ByteLevel, as DeepSeek-V3 has them
//   behaviors       Splits with every behavior, invert, a String pattern and
//                   ByteLevel's own GPT-2 regex (use_regex true)
// --corpus suite: real text from /usr/share/doc and the translations in
// /usr/share/locale, random words from every 128-code-point block of planes
// 0-3 and 14, emoji, whitespace, the added tokens, hostile cases (contractions,
// numbers, long runs, combining marks, Hangul jamo, compositions) and a sweep
// of code points through templates (every --sweep-step-th of the BMP and
// plane 1 from --sweep-offset, fewer elsewhere; see suiteSweep);
// --corpus sweep: only the template sweep over [--from, --to).
//
// Output (little-endian): "GPHF1\n", then per case: u32 text bytes, the
// text (UTF-8), u32 id count, the ids (i32), u32 NFC bytes (0xFFFFFFFF when
// the tokenizer has no normalizer), the NFC text.
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const modules = process.env.GEPARD_HF_NODE_MODULES || path.join(__dirname, 'node_modules');
const hf = require(path.join(modules, 'tokenizers'));

function parseArgs(argv) {
    const a = {variant: '', corpus: 'suite', from: 0, to: 0x110000, step: 1, offset: 0};
    for (let i = 2; i < argv.length; i += 2) {
        const k = argv[i], v = argv[i + 1];
        if (k === '--tokenizer') a.tokenizer = v;
        else if (k === '--variant') a.variant = v;
        else if (k === '--write-tokenizer') a.writeTokenizer = v;
        else if (k === '--corpus') a.corpus = v;
        else if (k === '--from') a.from = parseInt(v, 16);
        else if (k === '--to') a.to = parseInt(v, 16);
        else if (k === '--sweep-step') a.step = parseInt(v, 10);
        else if (k === '--sweep-offset') a.offset = parseInt(v, 10);
        else if (k === '--out') a.out = v;
        else if (k === '--stats') a.stats = v === '1';
        else throw new Error('unknown option ' + k);
    }
    if (!a.tokenizer || !a.out) throw new Error('--tokenizer and --out are required');
    return a;
}

// ---- tokenizer variants ----

const QWEN35 = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| " +
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const BYTELEVEL = {type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false};
const split = (regex, behavior, invert = false, literal = false) =>
    ({type: 'Split', pattern: literal ? {String: regex} : {Regex: regex}, behavior, invert});

function applyVariant(json, variant) {
    if (variant === '') return;
    if (variant === 'qwen35') {
        json.pre_tokenizer.pretokenizers[0].pattern.Regex = QWEN35;
    } else if (variant === 'split-sequence') {
        json.pre_tokenizer = {type: 'Sequence', pretokenizers: [
            split('\\p{N}{1,3}', 'Isolated'),
            split('[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+', 'Isolated'),
            split("[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?" +
                  '[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+',
                  'Isolated'),
            BYTELEVEL]};
    } else if (variant === 'behaviors') {
        json.pre_tokenizer = {type: 'Sequence', pretokenizers: [
            split(' ', 'MergedWithNext', false, true),
            split('\\p{Nd}+', 'Removed'),
            split('[aeiou\\p{M}]', 'Contiguous'),
            split('\\p{P}', 'MergedWithPrevious', true),
            split('\\s|x*', 'Isolated'),
            split('[^\\p{Lu}\\p{Cc}]+', 'Removed', true),
            split('\\b', 'MergedWithNext'),
            {type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true}]};
    } else {
        throw new Error('unknown variant ' + variant);
    }
}

// ---- corpus ----

function rng(seed) { // mulberry32
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
const rand = rng(20240614);
const pick = (arr) => arr[Math.floor(rand() * arr.length)];
const randInt = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
const isScalar = (c) => c < 0xd800 || c > 0xdfff;
const chr = (c) => String.fromCodePoint(c);

function readMo(file) {
    const d = fs.readFileSync(file);
    if (d.length < 28) return [];
    const magic = d.readUInt32LE(0);
    const rd = magic === 0x950412de ? (o) => d.readUInt32LE(o) : (o) => d.readUInt32BE(o);
    const n = rd(8), table = rd(16), out = [];
    for (let i = 0; i < n && table + 8 * i + 8 <= d.length; i++) {
        const len = rd(table + 8 * i), off = rd(table + 8 * i + 4);
        if (off + len <= d.length) out.push(d.toString('utf8', off, off + len).split('\0').join('\n'));
    }
    return out;
}

function listDir(dir) {
    try { return fs.readdirSync(dir).sort(); } catch (e) { return []; }
}

function realText(cases) {
    // Documentation: copyright files, READMEs and changelogs, up to 250 kB.
    let budget = 250000;
    for (const pkg of listDir('/usr/share/doc')) {
        for (const name of listDir(path.join('/usr/share/doc', pkg))) {
            if (budget <= 0) break;
            if (!/^(copyright|README.*|changelog.*|NEWS.*)$/.test(name)) continue;
            let text;
            try {
                const raw = fs.readFileSync(path.join('/usr/share/doc', pkg, name));
                text = (name.endsWith('.gz') ? zlib.gunzipSync(raw) : raw).toString('utf8');
            } catch (e) { continue; }
            text = text.slice(0, 6000);
            for (let i = 0; i < text.length; i += 3000) cases.push(text.slice(i, i + 3000));
            budget -= text.length;
        }
    }
    // Translations: about 1 kB of messages per language.
    for (const lang of listDir('/usr/share/locale')) {
        const dir = path.join('/usr/share/locale', lang, 'LC_MESSAGES');
        let text = '';
        for (const mo of listDir(dir)) {
            if (!mo.endsWith('.mo')) continue;
            try { text += readMo(path.join(dir, mo)).slice(1).join('\n') + '\n'; } catch (e) {}
            if (text.length > 1000) break;
        }
        if (text) cases.push(text.slice(0, 1000));
    }
}

function blockWords(cases) {
    const seps = [' ', '  ', '\n', ', ', "'s ", '.', '1', '\t', ' a ', '-', '\u3000'];
    const planes = [0, 1, 2, 3, 14];
    for (const plane of planes) {
        for (let b = plane * 0x10000; b < (plane + 1) * 0x10000; b += 128) {
            for (let rep = 0; rep < 2; rep++) {
                let s = '';
                const words = randInt(2, 6);
                for (let w = 0; w < words; w++) {
                    const n = randInt(1, 8);
                    for (let k = 0; k < n; k++) {
                        const c = b + randInt(0, 127);
                        if (isScalar(c)) s += chr(c);
                    }
                    s += pick(seps);
                }
                cases.push(s);
            }
        }
    }
}

function emoji(cases) {
    const fixed = ['👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇩🇪🇫🇷🇯🇵', '1️⃣#️⃣', '❤️‍🔥', '🫠🫨🪿', '🧑🏿‍🚀 go',
                   'a😀b', "😀's", ' 🙂 🙃', '👩‍❤️‍💋‍👨', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '☺︎☺️', '©️®️™️'];
    for (const f of fixed) cases.push(f);
    const bases = [[0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6ff], [0x1f900, 0x1f9ff],
                   [0x1fa70, 0x1faff], [0x2600, 0x27bf]];
    const mods = ['', '\u{1f3fb}', '\u{1f3fe}', '\ufe0f', '\u200d', '\ufe0e', ' '];
    for (let i = 0; i < 300; i++) {
        let s = '';
        for (let k = randInt(1, 6); k > 0; k--) {
            const [lo, hi] = pick(bases);
            s += chr(randInt(lo, hi)) + pick(mods);
        }
        cases.push(s);
    }
}

const WHITE = ['\t', '\n', '\u000b', '\f', '\r', ' ', '\u0085', '\u00a0', '\u1680', '\u2000',
               '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008',
               '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000'];
const NOT_WHITE = ['\u180e', '\u200b', '\u200c', '\u200d', '\u2060', '\ufeff', '\u001c', '\u001f'];

function whitespace(cases) {
    const words = ['a', 'b1', '.', "'s", 'word', '\u00e9', '\u4e00', '1', '\u0301'];
    for (const w of WHITE.concat(NOT_WHITE)) cases.push(`a${w}b${w}${w}c ${w}\n${w}`, w, w + w + 'x');
    for (let i = 0; i < 600; i++) {
        let s = '';
        for (let k = randInt(1, 12); k > 0; k--)
            s += rand() < 0.7 ? pick(rand() < 0.85 ? WHITE : NOT_WHITE).repeat(randInt(1, 3))
                              : pick(words);
        cases.push(s);
    }
}

function addedTokens(cases, json) {
    const toks = (json.added_tokens || []).map((t) => t.content).filter((t) => t.length > 0);
    for (const t of toks) {
        cases.push(t, `x${t}y`, t + t, ` ${t} `, t.slice(0, -1), `${t}\n\n${t}'s`, `\u00e9${t}\u0301`);
    }
    for (let i = 0; i < 200 && toks.length; i++) {
        let s = '';
        for (let k = randInt(1, 5); k > 0; k--)
            s += pick(toks) + pick(['', ' ', 'user\nHello, world!', '\n', '  12', '\u0301', 'é']);
        cases.push(s);
    }
}

const MARKS = [[0x300, 0x36f], [0x483, 0x489], [0x591, 0x5c7], [0x610, 0x61a], [0x64b, 0x65f],
               [0x6d6, 0x6ed], [0x730, 0x74a], [0x7eb, 0x7f3], [0x816, 0x82d], [0x898, 0x89f],
               [0x8ca, 0x8ff], [0x93c, 0x94d], [0x9bc, 0x9cd], [0xe31, 0xe3a], [0xe47, 0xe4e],
               [0xf18, 0xf19], [0xf71, 0xf84], [0x1ab0, 0x1ace], [0x1dc0, 0x1dff], [0x20d0, 0x20f0],
               [0x302a, 0x302f], [0x3099, 0x309a], [0xa8e0, 0xa8f1], [0xfe20, 0xfe2f],
               [0x101fd, 0x101fd], [0x10d24, 0x10d27], [0x10f46, 0x10f50], [0x11935, 0x11943],
               [0x16af0, 0x16af4], [0x16ff0, 0x16ff1], [0x1d165, 0x1d169], [0x1d16d, 0x1d172],
               [0x1e4ec, 0x1e4ef], [0x1e8d0, 0x1e8d6], [0x1e944, 0x1e94a]];
const randMark = () => { const [lo, hi] = pick(MARKS); return chr(randInt(lo, hi)); };

function hostile(cases) {
    const fixed = ["'s 'S 'ſ 'Ll 'LL 're ''s 's's x'sy 'd'm 'VE", "don't I'LL we'Re ſ's K's",
                   '12345 ١٢٣٤ ¹²³ ½¾ Ⅻ ① ꘠꘡ 𝟘𝟙 𞥐', '\u1c89\'s', 'e\u1ac0\u0301',
                   '\u0628\u08ca\u064e', '\u{11935}\u{11930}', '\u{11938}', 'ẞ ß ss', 'ǅungla',
                   '\u0344\u0345', 'a\u0345\u0301\u0316', '\u0958\u0959', '\u1100\u1161\u11a8',
                   '\uac00\u11a8', '\u1100\uac00\u1161', '\u0b47\u0b3e', '\u0cc6\u0cc2\u0cd5',
                   '\u{1d15e}\u{1d165}', 'i\u0307\u0301', 'A\u030a\u0301', '\u212b \u2126'];
    for (const f of fixed) cases.push(f);
    cases.push('a'.repeat(5000), ' '.repeat(3000) + 'x', '\n'.repeat(500), '1'.repeat(2000),
               '!?'.repeat(1500), 'ab '.repeat(1500), '\u00e9'.repeat(2000), '\u4e00'.repeat(3000),
               '\r\n'.repeat(300), ' \t'.repeat(500) + '\n');
    // Runs of combining marks of mixed classes, after a base letter or not.
    for (let i = 0; i < 300; i++) {
        let s = pick(['', 'a', 'e', 'A', '\u0628', 'x ', '\u05d0', '\u0915', '\uac00', 'ο']);
        for (let k = randInt(1, i < 290 ? 12 : 3000); k > 0; k--) s += randMark();
        cases.push(s + pick(['', 'b', ' ', "'s"]));
    }
    // Hangul jamo in every order.
    for (let i = 0; i < 200; i++) {
        let s = '';
        for (let k = randInt(1, 8); k > 0; k--)
            s += chr(pick([[0x1100, 0x1112], [0x1161, 0x1175], [0x11a8, 0x11c2], [0xac00, 0xd7a3],
                           [0x3131, 0x318e]].map(([lo, hi]) => randInt(lo, hi))));
        cases.push(s);
    }
    // Bases with marks: compositions, blocked ones, reordering.
    const bases = 'aeiouyAEIOUYcnszgkhwrlCNSZGKHWRLοαΩ\u0430\u0415\u0915\u05d0';
    for (let i = 0; i < 600; i++) {
        let s = '';
        for (let w = randInt(1, 4); w > 0; w--) {
            s += bases[randInt(0, bases.length - 1)];
            for (let k = randInt(0, 3); k > 0; k--)
                s += rand() < 0.6 ? chr(randInt(0x300, 0x338)) : randMark();
            s += pick(['', ' ', '\n', "'s", '1']);
        }
        cases.push(s);
    }
}

// The code-point sweep: each code point in several contexts.
function template(c) {
    const x = chr(c);
    return `${x}a${x}b ${x}'s 1${x}2 ${x}\u0301\u0316 e${x}\u0300 \u0628${x}\u064e x${x}${x}\n${x}`;
}

function sweep(cases, from, to, step, offset = 0) {
    for (let c = from + offset; c < to; c += step) if (isScalar(c)) cases.push(template(c));
}

function suiteSweep(cases, step, offset) {
    // Every step-th code point of the BMP and plane 1 (where nearly all
    // scripts live), every 16 step-th of planes 2, 3 and 14, every 256
    // step-th of the rest; starting at offset, so tests can cover different
    // residues.
    const s = Math.max(1, step);
    sweep(cases, 0, 0x20000, s, offset % s);
    sweep(cases, 0x20000, 0x40000, 16 * s, offset);
    sweep(cases, 0xe0000, 0xf0000, 16 * s, offset);
    for (const [lo, hi] of [[0x40000, 0xe0000], [0xf0000, 0x110000]])
        sweep(cases, lo, hi, 256 * s, offset);
}

// ---- output ----

class Writer {
    constructor(file) {
        this.fd = fs.openSync(file, 'w');
        this.parts = [];
        this.size = 0;
        this.push(Buffer.from('GPHF1\n'));
    }
    push(buf) {
        this.parts.push(buf);
        this.size += buf.length;
        if (this.size > (8 << 20)) this.flush();
    }
    u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); this.push(b); }
    flush() {
        fs.writeSync(this.fd, Buffer.concat(this.parts));
        this.parts = [];
        this.size = 0;
    }
    close() { this.flush(); fs.closeSync(this.fd); }
}

async function main() {
    const args = parseArgs(process.argv);
    const json = JSON.parse(fs.readFileSync(args.tokenizer, 'utf8'));
    applyVariant(json, args.variant);
    const text = JSON.stringify(json);
    if (args.writeTokenizer) fs.writeFileSync(args.writeTokenizer, text);
    const tok = hf.Tokenizer.fromString(text);
    const normalizer = tok.getNormalizer();

    const cases = [];
    if (args.corpus === 'suite') {
        const parts = [['real text', () => realText(cases)], ['blocks', () => blockWords(cases)],
                       ['emoji', () => emoji(cases)], ['whitespace', () => whitespace(cases)],
                       ['added tokens', () => addedTokens(cases, json)],
                       ['hostile', () => hostile(cases)],
                       ['sweep', () => suiteSweep(cases, args.step, args.offset)]];
        for (const [name, build] of parts) {
            const before = cases.length;
            build();
            if (args.stats) {
                const chars = cases.slice(before).reduce((n, c) => n + c.length, 0);
                process.stderr.write(`${name}: ${cases.length - before} cases, ${chars} UTF-16 units\n`);
            }
        }
    } else if (args.corpus === 'sweep') {
        sweep(cases, args.from, args.to, args.step);
    } else {
        throw new Error('unknown corpus ' + args.corpus);
    }

    const out = new Writer(args.out);
    const batch = 4096;
    for (let i = 0; i < cases.length; i += batch) {
        const chunk = cases.slice(i, i + batch);
        const encs = await tok.encodeBatch(chunk, {addSpecialTokens: false});
        for (let k = 0; k < chunk.length; k++) {
            const t = Buffer.from(chunk[k], 'utf8');
            out.u32(t.length);
            out.push(t);
            const ids = encs[k].getIds();
            const b = Buffer.alloc(4 + 4 * ids.length);
            b.writeUInt32LE(ids.length, 0);
            for (let j = 0; j < ids.length; j++) b.writeInt32LE(ids[j], 4 + 4 * j);
            out.push(b);
            if (normalizer) {
                const n = Buffer.from(normalizer.normalizeString(chunk[k]), 'utf8');
                out.u32(n.length);
                out.push(n);
            } else {
                out.u32(0xffffffff);
            }
        }
    }
    out.close();
}

main().catch((e) => {
    process.stderr.write('hf_ids.js: ' + (e && e.stack ? e.stack : e) + '\n');
    process.exit(1);
});
