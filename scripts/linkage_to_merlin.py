#!/usr/bin/env python3
"""Writes MERLIN-format files (.dat .ped .map .freq .model) from a LINKAGE locus file and
pedigree file, and beside them the LINKAGE files of the same analysis (one liability class,
the trait first, the markers in map order), so tests can run one analysis from both formats.

  linkage_to_merlin.py LOCUS.dat PED OUT_PREFIX [--start CM] [--chromosome C]
      [--model 'FREQ P0,P1,P2 LABEL'] [--status-from-class 1,2,1] [--twopoint]

Marker positions: cM by Haldane from the file's thetas (the trait left out, its flanking thetas
combined), starting at --start. The trait model: the affection locus's single liability class
(disease allele = allele 2), or --model. --status-from-class rewrites affection status 2 by
liability class (FASTLINK's example codes everyone 2 and puts the phenotype in the class).
--twopoint also writes OUT_PREFIX.linkage.MARKER.{dat,pre} for each marker (trait + marker).
Genotypes are written in MERLIN's several spellings (1/2, '1 2', A/C/G/T, 0/0, x x) in turn.
"""
import argparse
import math
import sys


def numbers(line):
    out = []
    for w in line.split():
        try:
            out.append(float(w))
        except ValueError:
            break
    return out


def read_locus(path):
    lines = [numbers(l) for l in open(path)]
    names = [l for l in open(path)]
    idx = [i for i, l in enumerate(lines) if l]
    pos = 0

    def nxt():
        nonlocal pos
        i = idx[pos]
        pos += 1
        return lines[i], names[i]

    head, _ = nxt()
    nloci, sexlinked = int(head[0]), int(head[2])
    nxt()
    order = [int(x) - 1 for x in nxt()[0]]
    loci = []
    for k in range(nloci):
        h, text = nxt()
        t, n = int(h[0]), int(h[1])
        name = text.split('#')[1].split()[0] if '#' in text else text.split('Locus')[1].split()[0]
        L = {'type': t, 'n': n, 'name': name.split('/')[0], 'freq': nxt()[0][:n]}
        if t == 1:
            L['classes'] = int(nxt()[0][0])
            L['pen'] = []
            for _ in range(L['classes']):
                L['pen'].append(nxt()[0][:n * (n + 1) // 2])
                peek = lines[idx[pos]]
                # a male penetrance line (SwiftLink's files leave it out; then a header follows)
                if sexlinked and len(peek) >= n and all(0 <= x <= 1 for x in peek[:n]):
                    nxt()
        loci.append(L)
    nxt()  # sex difference, interference
    thetas = nxt()[0][:nloci - 1]
    return {'sexlinked': sexlinked, 'order': order, 'loci': loci, 'thetas': thetas}


def haldane_cm(theta):
    return -50.0 * math.log(1 - 2 * theta)


def combine(a, b):
    return 0.5 * (1 - (1 - 2 * a) * (1 - 2 * b))


def read_ped(path, lf):
    loci = lf['loci']
    cols = sum(2 if L['type'] == 3 else (2 if L.get('classes', 1) > 1 else 1) for L in loci)
    rows = []
    for l in open(path):
        f = l.split()
        if not f:
            continue
        post = len(f) >= 9 + cols and len(f) - 9 >= cols and all(x.isdigit() for x in f[4:9])
        # Pre-makeped if exactly 5 + cols columns.
        if len(f) == 5 + cols:
            post = False
        base = 9 if post else 5
        sex = f[7] if post else f[4]
        ph, c = [], base
        for L in loci:
            if L['type'] == 3:
                ph.append((int(f[c]), int(f[c + 1])))
                c += 2
            else:
                cl = int(f[c + 1]) if L.get('classes', 1) > 1 else 1
                ph.append((int(f[c]), cl))
                c += 2 if L.get('classes', 1) > 1 else 1
        rows.append({'ped': f[0], 'id': f[1], 'fa': f[2], 'mo': f[3], 'sex': int(sex), 'ph': ph})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('locus')
    ap.add_argument('ped')
    ap.add_argument('out')
    ap.add_argument('--start', type=float, default=0.0)
    ap.add_argument('--chromosome', default='1')
    ap.add_argument('--model')
    ap.add_argument('--status-from-class')
    ap.add_argument('--twopoint', action='store_true')
    a = ap.parse_args()
    lf = read_locus(a.locus)
    loci = lf['loci']
    trait = next(k for k, L in enumerate(loci) if L['type'] == 1)
    T = loci[trait]
    if a.model:
        w = a.model.split()
        q, pen, label = float(w[0]), [float(x) for x in w[1].split(',')], w[2]
    else:
        if T['classes'] != 1:
            sys.exit('the affection locus has several liability classes: give --model')
        q, label = T['freq'][1], 'MODEL'
        p = T['pen'][0]
        pen = [p[0], p[1], p[2]]
    # Markers in map order, their thetas with the trait left out.
    order, th = lf['order'], lf['thetas']
    markers, mth = [], []
    pending = None
    for i, k in enumerate(order):
        if k == trait:
            if i > 0 and i < len(order) - 1:
                pending = th[i - 1]
            continue
        if markers:
            t = th[i - 1]
            if pending is not None:
                t = combine(pending, t)
                pending = None
            mth.append(t)
        markers.append(k)
    cm = [a.start]
    for t in mth:
        cm.append(cm[-1] + haldane_cm(t))
    rows = read_ped(a.ped, lf)
    status_map = [int(x) for x in a.status_from_class.split(',')] if a.status_from_class else None

    def status(r):
        s, cl = r['ph'][trait]
        if status_map and s == 2:
            return status_map[cl - 1]
        return s

    tname = T['name'] if T['name'] else 'TRAIT'
    with open(a.out + '.dat', 'w') as f:
        f.write('A %s\n' % tname)
        f.write('T unused_trait\n')  # a column the readers must skip
        for k in markers:
            f.write('M %s\n' % loci[k]['name'])
        f.write('E\n')
    with open(a.out + '.map', 'w') as f:
        f.write('CHROMOSOME MARKER POSITION\n')
        for k, c in zip(markers, cm):
            f.write('%s %s %.12f\n' % (a.chromosome, loci[k]['name'], c))
    with open(a.out + '.freq', 'w') as f:
        for k in markers:
            f.write('M %s\nF %s\n' % (loci[k]['name'], ' '.join('%.6f' % x for x in loci[k]['freq'])))
    with open(a.out + '.model', 'w') as f:
        f.write('DISEASE ALLELE_FREQ PENETRANCES LABEL\n')
        f.write('%s %.10g %s %s\n' % (tname, q, ','.join('%.10g' % x for x in pen), label))
    letters = 'ACGT'
    with open(a.out + '.ped', 'w') as f:
        for n, r in enumerate(rows):
            out = [r['ped'], r['id'], r['fa'], r['mo'], str(r['sex']), str(status(r)),
                   'x' if n % 2 else '1.5']
            for j, k in enumerate(markers):
                g1, g2 = r['ph'][k]
                if lf['sexlinked'] and r['sex'] == 1 and g1 and not g2:
                    g2 = g1
                style = (n + j) % 4
                if g1 == 0 and g2 == 0:
                    out.append(['0/0', 'x x', '0 0', 'N/N'][style])
                elif style == 0:
                    out.append('%d/%d' % (g1, g2))
                elif style == 1:
                    out.append('%d %d' % (g1, g2))
                elif style == 2 and loci[k]['n'] <= 4:
                    out.append('%s/%s' % (letters[g1 - 1], letters[g2 - 1]))
                else:
                    out.append('%d  %d' % (g1, g2))
            f.write(' '.join(out) + '\n')

    def linkage_files(prefix, mk, thetas):
        with open(prefix + '.dat', 'w') as f:
            f.write('%d 0 %d 5\n0 0.0 0.0 0\n%s\n' % (len(mk) + 1, lf['sexlinked'],
                                                      ' '.join(str(i + 1) for i in range(len(mk) + 1))))
            f.write('1 2 # %s\n%.10g %.10g\n1\n%s\n' % (tname, 1 - q, q, ' '.join('%.10g' % x for x in pen)))
            if lf['sexlinked']:
                f.write('%.10g %.10g\n' % (pen[0], pen[2]))
            for k in mk:
                f.write('3 %d # %s\n%s\n' % (loci[k]['n'], loci[k]['name'],
                                             ' '.join('%.6f' % x for x in loci[k]['freq'])))
            f.write('0 0\n%s\n' % ' '.join('%.17g' % t for t in [0.5] + thetas))
        with open(prefix + '.pre', 'w') as f:
            for r in rows:
                out = [r['ped'], r['id'], r['fa'], r['mo'], str(r['sex']), str(status(r))]
                for k in mk:
                    g1, g2 = r['ph'][k]
                    if lf['sexlinked'] and r['sex'] == 1 and g1 and not g2:
                        g2 = g1
                    out += [str(g1), str(g2)]
                f.write(' '.join(out) + '\n')

    # LINKAGE thetas from the written cM positions (what the MERLIN reader computes).
    lth = [0.5 * (1 - math.exp(-2 * (round(cm[i + 1], 12) - round(cm[i], 12)) / 100))
           for i in range(len(cm) - 1)]
    linkage_files(a.out + '.linkage', markers, lth)
    if a.twopoint:
        for k in markers:
            linkage_files(a.out + '.linkage.' + loci[k]['name'], [k], [])


if __name__ == '__main__':
    main()
