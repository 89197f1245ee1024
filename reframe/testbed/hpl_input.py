#!/usr/bin/env python3
"""Write HPL.dat files and read HPL 2.0 reports (Python 3.11 standard library only).

write_hpl_dat(path, N, NB, P, Q, **rest) writes an HPL 2.0 input file. Every value
not given takes the one of the thesis's sample file (Kearns 2002, Appendix A); the
PMAP line, new in HPL 2.0, defaults to 0 (row-major), HPL's own default.

parse_hpl_output(text) reads the report xhpl prints. A run counts only when every
test says PASSED and the summary says '0 tests completed and failed residual
checks' (see HplOutput.ok).

Command line:
  hpl_input.py write --N 2000 --NB 100 --P 1 --Q 2 out/HPL.dat
  hpl_input.py parse report.txt     (prints HPL-RESULT / HPL-SUMMARY records;
                                     exit 0 only when the run counts)
"""
import argparse
import json
import os
import re
import sys

# Appendix A of the thesis, with HPL 2.0's PMAP line added.
DEFAULTS = {
    "outfile": "HPL.out",   # used only when device is neither 6 nor 7
    "device": 6,            # 6 = stdout, 7 = stderr, other = the file above
    "pmap": 0,              # 0 = row-major, 1 = column-major process mapping
    "threshold": 16.0,      # residual check; <= 0 turns the check off
    "pfact": [2],           # 0 = left, 1 = Crout, 2 = right
    "nbmin": [4],
    "ndiv": [2],
    "rfact": [2],
    "bcast": [1],           # 0=1rg 1=1rM 2=2rg 3=2rM 4=Lng 5=LnM
    "depth": [1],
    "swap": 2,              # 0 = binary exchange, 1 = long, 2 = mix
    "swap_threshold": 80,
    "l1_form": 0,           # 0 = transposed, 1 = not transposed
    "u_form": 0,
    "equil": 1,
    "align": 8,             # memory alignment in doubles
}
MAX_PARAM = 20              # HPL_MAX_PARAM: most values one list line may hold

# name -> (smallest, largest) accepted, None for no bound
RANGES = {
    "N": (1, None), "NB": (1, None), "P": (1, None), "Q": (1, None),
    "device": (0, None), "pmap": (0, 1), "pfact": (0, 2), "nbmin": (1, None),
    "ndiv": (2, None), "rfact": (0, 2), "bcast": (0, 5), "depth": (0, None),
    "swap": (0, 2), "swap_threshold": (0, None), "l1_form": (0, 1),
    "u_form": (0, 1), "equil": (0, 1), "align": (1, None),
}
LIST_PARAMS = ("N", "NB", "pfact", "nbmin", "ndiv", "rfact", "bcast", "depth")


def _int(name, value):
    """One integer from an int or a string of digits; ValueError names the parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, str):
        if not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            raise ValueError(f"{name} must be an integer, got {value!r}")
        value = int(value)
    lo, hi = RANGES[name]
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"{name} must be {span}, got {value}")
    return value


def _ints(name, value):
    """A list of integers from one value, a list, or a comma-separated string."""
    if isinstance(value, str) and "," in value:
        value = value.split(",")
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not 1 <= len(items) <= MAX_PARAM:
        raise ValueError(f"{name} needs 1..{MAX_PARAM} values, got {len(items)}")
    return [_int(name, v) for v in items]


def _float(name, value):
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if out != out or out in (float("inf"), float("-inf")):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return out


def check_parameters(N, NB, P, Q, mem_bytes=None, **rest):
    """Validated parameters as a dict, or ValueError naming the bad one."""
    unknown = sorted(set(rest) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown HPL.dat parameter {unknown[0]!r} "
                         f"(known: {', '.join(sorted(DEFAULTS))})")
    prm = dict(DEFAULTS, **rest)
    prm["N"], prm["NB"] = _ints("N", N), _ints("NB", NB)
    prm["P"], prm["Q"] = _int("P", P), _int("Q", Q)
    if prm["P"] > prm["Q"]:
        raise ValueError(f"P must not exceed Q (HPL runs best with P <= Q), "
                         f"got P={prm['P']} Q={prm['Q']}")
    for n in prm["N"]:
        for nb in prm["NB"]:
            if n % nb:
                raise ValueError(f"N must be a multiple of NB, got N={n} NB={nb}")
    if mem_bytes is not None:
        budget = _float("mem_bytes", mem_bytes)
        for n in prm["N"]:
            if 8 * n * n > budget:
                raise ValueError(f"N={n} needs {8 * n * n} bytes (8*N^2) for the matrix, "
                                 f"more than the memory budget mem_bytes={int(budget)} bytes")
    for name in ("pfact", "nbmin", "ndiv", "rfact", "bcast", "depth"):
        prm[name] = _ints(name, prm[name])
    for name in ("device", "pmap", "swap", "swap_threshold", "l1_form", "u_form",
                 "equil", "align"):
        prm[name] = _int(name, prm[name])
    prm["threshold"] = _float("threshold", prm["threshold"])
    if not isinstance(prm["outfile"], str) or not re.fullmatch(r"\S+", prm["outfile"]):
        raise ValueError(f"outfile must be one word (a file name), got {prm['outfile']!r}")
    return prm


def hpl_dat_text(N, NB, P, Q, mem_bytes=None, **rest):
    """The text of an HPL.dat file (see write_hpl_dat)."""
    p = check_parameters(N, NB, P, Q, mem_bytes, **rest)

    def row(value, label):
        text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
        return f"{text:<12} {label}"

    def lst(name, label, count_label):
        return [row(len(p[name]), count_label), row(p[name], label)]

    lines = ["HPLinpack benchmark input file",
             "mpi-testbed apps/hpl/hpl_input.py (defaults: Kearns 2002, Appendix A)",
             row(p["outfile"], "output file name (if any)"),
             row(p["device"], "device out (6=stdout,7=stderr,file)"),
             *lst("N", "Ns", "# of problems sizes (N)"),
             *lst("NB", "NBs", "# of NBs"),
             row(p["pmap"], "PMAP process mapping (0=Row-,1=Column-major)"),
             row(1, "# of process grids (P x Q)"),
             row(p["P"], "Ps"),
             row(p["Q"], "Qs"),
             row(repr(p["threshold"]), "threshold"),
             *lst("pfact", "PFACTs (0=left, 1=Crout, 2=Right)", "# of panel fact"),
             *lst("nbmin", "NBMINs (>= 1)", "# of recursive stopping criterium"),
             *lst("ndiv", "NDIVs", "# of panels in recursion"),
             *lst("rfact", "RFACTs (0=left, 1=Crout, 2=Right)", "# of recursive panel fact."),
             *lst("bcast", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)", "# of broadcast"),
             *lst("depth", "DEPTHs (>=0)", "# of lookahead depth"),
             row(p["swap"], "SWAP (0=bin-exch,1=long,2=mix)"),
             row(p["swap_threshold"], "swapping threshold"),
             row(p["l1_form"], "L1 in (0=transposed,1=no-transposed) form"),
             row(p["u_form"], "U  in (0=transposed,1=no-transposed) form"),
             row(p["equil"], "Equilibration (0=no,1=yes)"),
             row(p["align"], "memory alignment in double (> 0)")]
    return "\n".join(lines) + "\n"


def write_hpl_dat(path, N, NB, P, Q, mem_bytes=None, **rest):
    """Write HPL.dat at path. N and NB take one value or a list; P and Q one grid.

    rest: any key of DEFAULTS. mem_bytes: reject any N whose matrix (8*N^2
    bytes) is larger. Raises ValueError naming the bad parameter.
    """
    text = hpl_dat_text(N, NB, P, Q, mem_bytes, **rest)
    with open(path, "w", encoding="ascii") as out:
        out.write(text)
    return text


# ---------------------------------------------------------------- report parsing

_RESULT = re.compile(r"^(W[RC]\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s*$")
_RESIDUAL = re.compile(r"^\|\|Ax-b\|\|.*=\s*(\S+)\s+\.+\s+(PASSED|FAILED)\s*$")
_COUNTS = {
    "finished": re.compile(r"Finished\s+(\d+)\s+tests"),
    "passed": re.compile(r"(\d+)\s+tests completed and passed residual checks"),
    "failed": re.compile(r"(\d+)\s+tests completed and failed residual checks"),
    "unchecked": re.compile(r"(\d+)\s+tests completed without checking"),
    "skipped": re.compile(r"(\d+)\s+tests skipped because of illegal input values"),
}


class HplOutput(list):
    """The result records (dicts) of one report, plus its closing counts.

    summary: {"finished", "passed", "failed", "unchecked", "skipped"} as found
    (a count the report does not print is None), or None without a summary.
    """

    def __init__(self, records, summary):
        super().__init__(records)
        self.summary = summary

    @property
    def ok(self):
        """True only when every test PASSED and the summary counts no failure."""
        s = self.summary
        return (bool(self) and all(r["passed"] for r in self) and s is not None
                and s["failed"] == 0 and s["passed"] == len(self)
                and not s["skipped"] and not s["unchecked"])


def _number(text):
    try:
        return float(text)
    except ValueError:
        return None


def parse_hpl_output(text):
    """Records {tv, N, NB, P, Q, time_s, gflops, residual, passed} in report order.

    tv is HPL's T/V code (e.g. WR11R2R4); residual is the scaled residual
    ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N), None when unchecked;
    passed is True only when each residual line of the test says PASSED.
    """
    records = []
    for line in text.splitlines():
        m = _RESULT.match(line.strip())
        if m:
            records.append({"tv": m[1], "N": int(m[2]), "NB": int(m[3]), "P": int(m[4]),
                            "Q": int(m[5]), "time_s": _number(m[6]),
                            "gflops": _number(m[7]), "residual": None, "passed": False})
            continue
        m = _RESIDUAL.match(line.strip())
        if m and records:
            rec, value = records[-1], _number(m[1])
            first = rec["residual"] is None
            if value is not None and (first or value > rec["residual"]):
                rec["residual"] = value
            rec["passed"] = (first or rec["passed"]) and m[2] == "PASSED"
    found = {k: rx.search(text) for k, rx in _COUNTS.items()}
    summary = None
    if found["finished"]:
        summary = {k: (int(m[1]) if m else None) for k, m in found.items()}
    return HplOutput(records, summary)


# ---------------------------------------------------------------- command line

def _main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="write an HPL.dat file")
    w.add_argument("path", help="HPL.dat to write (parent directories are created)")
    for name in ("N", "NB", "P", "Q"):
        w.add_argument(f"--{name}", required=True,
                       help="comma-separated list allowed" if name in LIST_PARAMS else None)
    w.add_argument("--mem-bytes", help="reject N whose 8*N^2 bytes exceed this")
    for name, value in DEFAULTS.items():
        w.add_argument("--" + name.replace("_", "-"), dest=name,
                       help=f"default {','.join(map(str, value)) if isinstance(value, list) else value}")
    r = sub.add_parser("parse", help="read an xhpl report, print HPL-RESULT/HPL-SUMMARY records")
    r.add_argument("report", nargs="?", default="-", help="file, or - for stdin")
    args = ap.parse_args(argv)

    if args.cmd == "write":
        rest = {k: getattr(args, k) for k in DEFAULTS if getattr(args, k) is not None}
        try:
            parent = os.path.dirname(args.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            write_hpl_dat(args.path, args.N, args.NB, args.P, args.Q, args.mem_bytes, **rest)
        except (ValueError, OSError) as err:
            print(f"hpl_input.py: error: {err}", file=sys.stderr)
            return 2
        return 0

    try:
        if args.report == "-":
            text = sys.stdin.read()
        else:
            with open(args.report, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as err:
        print(f"hpl_input.py: error: cannot read report {args.report!r}: {err}", file=sys.stderr)
        return 2
    out = parse_hpl_output(text)
    for rec in out:
        print("HPL-RESULT " + json.dumps(rec))
    print("HPL-SUMMARY " + json.dumps({"records": len(out), "ok": out.ok,
                                       "counts": out.summary}))
    return 0 if out.ok else 1


if __name__ == "__main__":
    sys.exit(_main())
