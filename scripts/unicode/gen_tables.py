#!/usr/bin/env python3
"""gen_tables.py — build the tokenizer's Unicode tables from Hugging Face's
own behaviour.

    python3 scripts/unicode/gen_tables.py            # runs probe_hf.js (node)
    python3 scripts/unicode/gen_tables.py facts.json  # or reads its saved output

Writes
  src/text/unicode_data.c        NFC tables and the split-regex substitution table
  tests/data/unicode_classes.txt regex class membership per code point (for tests)

Everything comes from scripts/unicode/probe_hf.js, which asks HF `tokenizers`
(the npm package, Rust) itself. Python's unicodedata is used for three things
only, each checked against HF's answers:
  - the numeric combining class labels (HF only reveals their order, which
    must agree with the labels);
  - the one-step canonical decomposition of each character HF recomposes
    (which pair composes to it), checked against HF's full decomposition;
  - the frozen Unicode 3.2 database (unicodedata.ucd_3_2_0), to tell which
    code points may be classified differently by a PCRE2 built with any
    Unicode version from 3.2 on (see "split substitution" below).

Split substitution: PCRE2 evaluates \\p{L} etc. with the Unicode tables it was
built with (10.42: Unicode 14), HF's Oniguruma with Unicode 16. Every code
point whose general category is not the same in Unicode 3.2, in Python's
Unicode version and in HF's answers, and every unassigned code point of 3 or 4
UTF-8 bytes (which a PCRE2 newer than HF might know), gets a representative:
a code point with the same category (and, outside marks, the same Alphabetic
property, for \\w) and the same UTF-8 length whose category has not changed
since Unicode 3.2. The tokenizer matches the split regex on a copy of the text
in which such code points are replaced by their representatives, so PCRE2's
answer is HF's whatever Unicode version PCRE2 has.
"""
import json
import os
import subprocess
import sys
import unicodedata

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..'))
OUT_C = os.path.join(ROOT, 'src', 'text', 'unicode_data.c')
OUT_CLASSES = os.path.join(ROOT, 'tests', 'data', 'unicode_classes.txt')

CATEGORIES = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps',
              'Pe', 'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co',
              'Cn']
BLOCK = 128  # code points per second-stage block
N_CP = 0x110000
HANGUL_S, HANGUL_L, HANGUL_V, HANGUL_T = 0xAC00, 0x1100, 0x1161, 0x11A7
HANGUL_LCOUNT, HANGUL_VCOUNT, HANGUL_TCOUNT = 19, 21, 28
HANGUL_COUNT = HANGUL_LCOUNT * HANGUL_VCOUNT * HANGUL_TCOUNT


def fail(msg):
    sys.exit('gen_tables.py: ' + msg)


def load_facts():
    if len(sys.argv) > 1:
        with open(sys.argv[1]) as f:
            return json.load(f)
    probe = os.path.join(ROOT, 'scripts', 'unicode', 'probe_hf.js')
    out = subprocess.run(['node', probe], check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)


def is_scalar(c):
    return c < 0xD800 or c > 0xDFFF


def utf8_len(c):
    return 1 if c < 0x80 else 2 if c < 0x800 else 3 if c < 0x10000 else 4


def expand(ranges):
    for a, b in ranges:
        yield from range(a, b + 1)


def general_categories(facts):
    gc = [None] * N_CP
    for name in CATEGORIES:
        for c in expand(facts['categories'][name]):
            if gc[c] is not None:
                fail('U+%04X is in both \\p{%s} and \\p{%s}' % (c, gc[c], name))
            gc[c] = name
    missing = [c for c in range(N_CP) if is_scalar(c) and gc[c] is None]
    if missing:
        fail('U+%04X is in no general category' % missing[0])
    return gc


# ---- split substitution ----

# Categories with no character of 4 UTF-8 bytes in Unicode 3.2: the oldest
# candidates (their Unicode version is not in Python's database, hence here).
LATER_CHOICE = {('Lm', 1, 4): 0x16F93, ('Sc', 0, 4): 0x1ECB0}
LATER_AGE = {0x16F93: '6.1', 0x1ECB0: '11.0', 0x10EAD: '13.0', 0x10100: '4.0', 0x1F3FB: '8.0',
             0x1F130: '6.0'}


def busy(c):
    """Blocks that patterns tend to name in character ranges: CJK, kana,
    Hangul, full-width forms, general punctuation."""
    return (0x2010 <= c <= 0x206F or 0x2E80 <= c <= 0x9FFF or 0xAC00 <= c <= 0xD7FF
            or 0xF900 <= c <= 0xFAFF or 0xFE30 <= c <= 0xFE4F or 0xFF00 <= c <= 0xFFEF)

def substitution(facts, gc):
    alpha = bytearray(N_CP)
    for c in expand(facts['properties']['Alphabetic']):
        alpha[c] = 1
    old = unicodedata.ucd_3_2_0
    unstable = set()
    for c in range(N_CP):
        if not is_scalar(c):
            continue
        g = gc[c]
        ch = chr(c)
        if g != old.category(ch) or g != unicodedata.category(ch) or (g == 'Cn' and c >= 0x800):
            unstable.add(c)
    if any(c < 0x80 for c in unstable):
        fail('an ASCII character changed category')

    def key(c):
        g = gc[c]
        return (g, 0 if g[0] == 'M' else alpha[c], utf8_len(c))

    def caseless(c):
        ch = chr(c)
        return ch.lower() == ch and ch.upper() == ch and ch.casefold() == ch

    wanted = sorted({key(c) for c in unstable})
    reps, notes = {}, []
    stable_by_key, later_by_key = {}, {}
    for c in range(0x80, N_CP):
        if not is_scalar(c):
            continue
        if c not in unstable:
            stable_by_key.setdefault(key(c), []).append(c)
        elif gc[c] == unicodedata.category(chr(c)) and gc[c] != 'Cn':
            later_by_key.setdefault(key(c), []).append(c)
    for k in wanted:
        g, _, n = k
        if g == 'Cn':
            rep = 0xFDD0 if n == 3 else 0x1FFFE  # noncharacters: unassigned forever
            if gc[rep] != 'Cn':
                fail('noncharacter U+%04X is not Cn' % rep)
        elif k in stable_by_key:
            # Caseless, and away from blocks that patterns spell out as ranges.
            order = sorted(stable_by_key[k],
                           key=lambda c: (not caseless(c), busy(c), n == 3 and c < 0xA000, c))
            rep = order[0]
        elif k in later_by_key:
            rep = LATER_CHOICE.get(k, later_by_key[k][0])
            if rep not in later_by_key[k]:
                fail('U+%04X is no representative for %r' % (rep, k))
            notes.append('U+%04X (%s, 4 bytes) dates from Unicode %s'
                         % (rep, g, LATER_AGE.get(rep, '?')))
        else:
            fail('no representative for %r' % (k,))
        reps[k] = rep
    rep_list = sorted(set(reps.values()))
    if len(rep_list) > 255:
        fail('too many representatives')
    index = {r: i + 1 for i, r in enumerate(rep_list)}
    table = bytearray(N_CP)
    bounds = {}
    for c in unstable:
        r = reps[key(c)]
        table[c] = index[r]
        lo, hi = bounds.get(r, (c, c))
        bounds[r] = (min(lo, c), max(hi, c))
    for r in rep_list:  # a representative stands for itself too
        if table[r] == 0:
            table[r] = index[r]
        lo, hi = bounds[r]
        bounds[r] = (min(lo, r), max(hi, r))
    for c in range(N_CP):
        if table[c]:
            r = rep_list[table[c] - 1]
            if key(r) != key(c):
                fail('representative U+%04X does not match U+%04X' % (r, c))
    return table, rep_list, bounds, notes, len(unstable)


# ---- normalisation ----

def combining_classes(facts):
    marks = facts['nonzero_ccc']
    greater = facts['ccc_greater']
    ccc = {}
    for m in marks:
        v = unicodedata.combining(chr(m))
        if v == 0:
            fail('HF gives U+%04X a non-zero class, Python class 0' % m)
        ccc[m] = v
    for i, x in enumerate(marks):
        row = greater[i]
        for j, y in enumerate(marks):
            if (row[j] == '1') != (ccc[x] > ccc[y]):
                fail('class order of U+%04X and U+%04X differs from HF' % (x, y))
    return ccc


def canonical_order(seq, ccc):
    out = list(seq)
    i = 0
    while i < len(out):
        if ccc.get(out[i], 0) == 0:
            i += 1
            continue
        j = i
        while j < len(out) and ccc.get(out[j], 0) != 0:
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda c: ccc[c])  # stable
        i = j
    return out


def hangul_nfd(c):
    s = c - HANGUL_S
    l, v, t = HANGUL_L + s // (HANGUL_VCOUNT * HANGUL_TCOUNT), \
        HANGUL_V + (s % (HANGUL_VCOUNT * HANGUL_TCOUNT)) // HANGUL_TCOUNT, \
        HANGUL_T + s % HANGUL_TCOUNT
    return [l, v] if t == HANGUL_T else [l, v, t]


def normalisation(facts, ccc):
    nfd = {int(k): v for k, v in facts['nfd'].items()}
    for c in range(HANGUL_S, HANGUL_S + HANGUL_COUNT):
        if nfd.get(c) != hangul_nfd(c):
            fail('HF decomposes Hangul syllable U+%04X differently' % c)
    decomp = {c: d for c, d in nfd.items() if not HANGUL_S <= c < HANGUL_S + HANGUL_COUNT}
    for c, d in decomp.items():
        if canonical_order(d, ccc) != d:
            fail('HF decomposition of U+%04X is not in canonical order' % c)
        if len(d) > 4:
            fail('HF decomposition of U+%04X is longer than 4' % c)
    recomposes = set(facts['recomposes'])
    pairs = {}
    for c in sorted(recomposes):
        if HANGUL_S <= c < HANGUL_S + HANGUL_COUNT:
            continue
        fields = unicodedata.decomposition(chr(c)).split()
        if len(fields) != 2 or fields[0].startswith('<'):
            fail('U+%04X recomposes but has no two-character canonical mapping' % c)
        a, b = int(fields[0], 16), int(fields[1], 16)
        if canonical_order(nfd.get(a, [a]) + nfd.get(b, [b]), ccc) != nfd[c]:
            fail('mapping of U+%04X disagrees with HF decomposition' % c)
        pairs[(a, b)] = c
    return decomp, pairs


# ---- output ----

def two_stage(values):
    """Split a per-code-point list into stage 1 (block numbers) and blocks."""
    blocks, stage1, seen = [], [], {}
    for start in range(0, N_CP, BLOCK):
        block = tuple(values[start:start + BLOCK])
        if block not in seen:
            seen[block] = len(blocks)
            blocks.append(block)
        stage1.append(seen[block])
    return stage1, blocks


def c_array(ctype, name, items, per_line, fmt):
    lines = ['const %s %s[%d] = {' % (ctype, name, len(items))]
    for i in range(0, len(items), per_line):
        lines.append('    ' + ', '.join(fmt(x) for x in items[i:i + per_line]) + ',')
    lines.append('};')
    return '\n'.join(lines)


def write_c(facts, sub, ccc, decomp, pairs):
    table, rep_list, bounds, notes, n_unstable = sub
    props = [0] * N_CP
    for c, v in ccc.items():
        props[c] = v
    for c in decomp:
        props[c] = 0x100
    seconds = {b for (_, b) in pairs}
    seconds.update(range(HANGUL_V, HANGUL_V + HANGUL_VCOUNT))
    seconds.update(range(HANGUL_T + 1, HANGUL_T + HANGUL_TCOUNT))
    for b in seconds:
        props[b] |= 0x200
    n1, nb = two_stage(props)
    r1, rb = two_stage(list(table))
    if len(nb) > 65535 or len(rb) > 65535:
        fail('too many blocks')

    pool, dec_rows = [], []
    for c in sorted(decomp):
        dec_rows.append((c, len(pool), len(decomp[c])))
        pool.extend(decomp[c])
    comp_rows = sorted((a, b, c) for (a, b), c in pairs.items())

    hx = lambda x: '0x%X' % x
    out = []
    out.append('''/* unicode_data.c — GENERATED by scripts/unicode/gen_tables.py; do not edit.
 *
 * Unicode tables that make the tokenizer behave like Hugging Face `tokenizers`
 * %s (npm), read from that library's own answers by
 * scripts/unicode/probe_hf.js (see unicode.h for how they are used):
 *
 *  - NFC: canonical combining classes (%d marks), full canonical
 *    decompositions (%d, Hangul syllables algorithmic) and composition pairs
 *    (%d) exactly as HF normalises — older tables than current Unicode.
 *  - Split regex: a representative for each of the %d code points whose
 *    general category a PCRE2 of another Unicode version may see differently
 *    from HF's Oniguruma (%d representatives). Unicode 3.2 has no
 *    character of 4 UTF-8 bytes for some categories; the representatives
 *    of those are newer, so a PCRE2 built with Unicode 13 or later is needed
 *    for an exact match:%s
 */
#include "text/unicode.h"

/* clang-format off */
''' % (facts['hf_tokenizers_version'], len(ccc), len(decomp), len(pairs), n_unstable,
       len(rep_list),
       ''.join('\n *      ' + n for n in notes)))
    out.append(c_array('uint16_t', 'gp_uni_nfc_stage1', n1, 16, str))
    out.append(c_array('uint16_t', 'gp_uni_nfc_blocks', [v for b in nb for v in b], 16, hx))
    out.append(c_array('uint16_t', 'gp_uni_rep_stage1', r1, 16, str))
    out.append(c_array('uint8_t', 'gp_uni_rep_blocks', [v for b in rb for v in b], 32, str))
    out.append('const gp_uni_rep gp_uni_reps[%d] = {\n    {0, 0, 0},\n%s\n};' % (
        len(rep_list) + 1,
        '\n'.join('    {0x%X, 0x%X, 0x%X},' % (r, bounds[r][0], bounds[r][1]) for r in rep_list)))
    out.append('const size_t gp_uni_n_reps = %d;' % (len(rep_list) + 1))
    out.append(c_array('uint32_t', 'gp_uni_decomp_pool', pool, 12, hx))
    out.append('const gp_uni_decomp gp_uni_decomps[%d] = {\n%s\n};' % (
        len(dec_rows), '\n'.join('    {0x%X, %d, %d},' % r for r in dec_rows)))
    out.append('const size_t gp_uni_n_decomps = %d;' % len(dec_rows))
    out.append('const gp_uni_pair gp_uni_pairs[%d] = {\n%s\n};' % (
        len(comp_rows), '\n'.join('    {0x%X, 0x%X, 0x%X},' % r for r in comp_rows)))
    out.append('const size_t gp_uni_n_pairs = %d;' % len(comp_rows))
    out.append('/* clang-format on */\n')
    with open(OUT_C, 'w') as f:
        f.write('\n'.join(out))


def write_classes(facts):
    lines = ['# unicode_classes.txt — GENERATED by scripts/unicode/gen_tables.py; do not edit.',
             '# Members of regex classes as Hugging Face tokenizers %s (Oniguruma) matches them,'
             % facts['hf_tokenizers_version'],
             '# one range per line: NAME FIRST LAST (hex). NAME is a general category or',
             '# White_Space, Alphabetic, s (\\s), d (\\d), w (\\w), h (\\h), w_in_class ([\\w]).']
    for name in CATEGORIES:
        lines += ['%s %X %X' % (name, a, b) for a, b in facts['categories'][name]]
    for name, ranges in facts['properties'].items():
        lines += ['%s %X %X' % (name, a, b) for a, b in ranges]
    with open(OUT_CLASSES, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def main():
    facts = load_facts()
    gc = general_categories(facts)
    sub = substitution(facts, gc)
    ccc = combining_classes(facts)
    decomp, pairs = normalisation(facts, ccc)
    write_c(facts, sub, ccc, decomp, pairs)
    write_classes(facts)
    print('gen_tables.py: %d substituted code points, %d representatives, %d marks, '
          '%d decompositions, %d pairs' % (sub[4], len(sub[1]), len(ccc), len(decomp), len(pairs)))
    for n in sub[3]:
        print('  note: ' + n)


if __name__ == '__main__':
    main()
