"""What the Python tests share (support.hpp's counterpart): the kinfer binary and the data folder
meson passes (KINFER_EXE, KINFER_DATA), a check that prints and records each assertion, the UAI
networks by name and their references (data/uai/REFERENCES.tsv)."""
import os
import sys

EXE = os.environ["KINFER_EXE"]
DATA = os.environ["KINFER_DATA"]
passes, failures = [], []


def check(cond, what):
    """Prints `ok` or `FAIL` and what was asserted; the verdict is counted for finish()."""
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    (passes if cond else failures).append(what)
    return cond


def finish():
    """Prints the counts and exits 1 when a check failed."""
    print(f"{len(passes)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def network(name):
    """The path of a UAI network of data/uai (plain or gzipped)."""
    for cand in (name + ".uai", name + ".uai.gz"):
        p = os.path.join(DATA, "uai", cand)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(name)


def references():
    """name -> (log10 P(e), tolerance: half the last printed digit) from data/uai/REFERENCES.tsv."""
    ref = {}
    with open(os.path.join(DATA, "uai", "REFERENCES.tsv")) as f:
        next(f)
        for line in f:
            name, value = line.split("\t")[:2]
            decimals = len(value.split(".")[1]) if "." in value else 0
            ref[name] = (float(value), 0.5 * 10 ** -decimals)
    return ref
