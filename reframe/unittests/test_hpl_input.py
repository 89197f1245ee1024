"""Tests of testbed/hpl_input.py that need no MPI: HPL.dat validation and report parsing."""
import subprocess
import sys

import pytest

from testbed import hpl_input

# A report in xhpl's layout: two tests, the second failing its residual check.
REPORT = """\
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11R2R4        2000   100     1     2               1.23              4.341e+00
--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0051942 ...... PASSED
================================================================================
T/V                N    NB     P     Q               Time                 Gflops
--------------------------------------------------------------------------------
WR11R2R4        4000   100     1     2               8.50              5.024e+00
--------------------------------------------------------------------------------
||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)=        0.0049001 ...... FAILED
||Ax-b||_oo  . . . . . . . . . . . . . . . . . =           0.000000
================================================================================

Finished      2 tests with the following results:
              1 tests completed and passed residual checks,
              1 tests completed and failed residual checks,
              0 tests skipped because of illegal input values.
--------------------------------------------------------------------------------

End of Tests.
================================================================================
"""


def dat_lines(**kw):
    args = dict(N=2000, NB=100, P=1, Q=2)
    args.update(kw)
    return hpl_input.hpl_dat_text(**args).splitlines()


def test_defaults_are_the_thesis_appendix_a():
    lines = dat_lines()
    assert len(lines) == 31  # HPL 2.0 layout: Appendix A plus the PMAP line
    first = {line[13:].strip(): line[:12].strip() for line in lines[2:]}
    assert first["Ns"] == "2000" and first["NBs"] == "100"
    assert first["Ps"] == "1" and first["Qs"] == "2"
    assert first["threshold"] == "16.0"
    assert first["PFACTs (0=left, 1=Crout, 2=Right)"] == "2"
    assert first["NBMINs (>= 1)"] == "4"
    assert first["NDIVs"] == "2"
    assert first["RFACTs (0=left, 1=Crout, 2=Right)"] == "2"
    assert first["BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"] == "1"
    assert first["DEPTHs (>=0)"] == "1"
    assert first["SWAP (0=bin-exch,1=long,2=mix)"] == "2"
    assert first["swapping threshold"] == "80"
    assert first["Equilibration (0=no,1=yes)"] == "1"
    assert first["memory alignment in double (> 0)"] == "8"
    assert first["device out (6=stdout,7=stderr,file)"] == "6"


def test_lists_and_overrides():
    lines = dat_lines(N=[1000, 2000], NB="100", threshold=1e-30, depth=[0, 1])
    assert lines[4].startswith("2 ") and lines[5].startswith("1000 2000 ")
    assert lines[12].startswith("1e-30 ")
    assert any(line.startswith("0 1 ") and "DEPTHs" in line for line in lines)


def test_write_file(tmp_path):
    path = tmp_path / "HPL.dat"
    text = hpl_input.write_hpl_dat(path, 1000, 100, 1, 1)
    assert path.read_text() == text


@pytest.mark.parametrize("kw, words", [
    (dict(N="abc"), ["N", "'abc'"]),
    (dict(NB=2.5), ["NB", "2.5"]),
    (dict(P="x"), ["P", "'x'"]),
    (dict(N=2000, NB=150), ["multiple", "N=2000", "NB=150"]),
    (dict(P=2, Q=1), ["P", "Q", "P=2 Q=1"]),
    (dict(N=0, NB=1), ["N", "0"]),
    (dict(pfact=3), ["pfact", "3"]),
    (dict(threshold="tiny"), ["threshold", "'tiny'"]),
    (dict(bogus=1), ["bogus"]),
    (dict(N=40000, mem_bytes=4_000_000_000), ["N=40000", "12800000000", "4000000000"]),
])
def test_rejects_with_parameter_named(kw, words):
    with pytest.raises(ValueError) as err:
        dat_lines(**kw)
    for word in words:
        assert word in str(err.value)


def test_memory_budget_allows_what_fits():
    dat_lines(N=10000, mem_bytes=8 * 10000 ** 2)


def test_parse_records_and_counts():
    out = hpl_input.parse_hpl_output(REPORT)
    assert len(out) == 2
    assert out[0] == {"tv": "WR11R2R4", "N": 2000, "NB": 100, "P": 1, "Q": 2,
                      "time_s": 1.23, "gflops": 4.341, "residual": 0.0051942, "passed": True}
    assert out[1]["N"] == 4000 and out[1]["passed"] is False
    assert out.summary == {"finished": 2, "passed": 1, "failed": 1, "unchecked": None,
                           "skipped": 0}
    assert out.ok is False


def test_parse_passing_run_is_ok():
    one = REPORT.replace("FAILED", "PASSED").replace(
        "1 tests completed and passed", "2 tests completed and passed").replace(
        "1 tests completed and failed", "0 tests completed and failed")
    assert hpl_input.parse_hpl_output(one).ok is True


def test_parse_needs_summary_and_records():
    body = REPORT.split("Finished")[0].replace("FAILED", "PASSED")
    assert hpl_input.parse_hpl_output(body).ok is False  # cut off before the summary
    assert hpl_input.parse_hpl_output("").ok is False


def test_parse_unchecked_run_does_not_count():
    text = REPORT.split("-" * 80 + "\n||")[0] + (
        "Finished      1 tests with the following results:\n"
        "              1 tests completed without checking,\n"
        "              0 tests skipped because of illegal input values.\n")
    out = hpl_input.parse_hpl_output(text)
    assert len(out) == 1 and out[0]["residual"] is None and out.ok is False


def test_command_line(tmp_path):
    target = tmp_path / "out" / "HPL.dat"
    ok = subprocess.run([sys.executable, "-m", "testbed.hpl_input", "write", "--N", "2000", "--NB", "100",
                         "--P", "1", "--Q", "2", str(target)], capture_output=True, text=True)
    assert ok.returncode == 0 and target.exists()
    bad = subprocess.run([sys.executable, "-m", "testbed.hpl_input", "write", "--N", "2000", "--NB", "150",
                          "--P", "1", "--Q", "2", str(target)], capture_output=True, text=True)
    assert bad.returncode == 2 and "NB=150" in bad.stderr
    parsed = subprocess.run([sys.executable, "-m", "testbed.hpl_input", "parse", "-"], input=REPORT,
                            capture_output=True, text=True)
    assert parsed.returncode == 1
    assert parsed.stdout.count("HPL-RESULT ") == 2 and '"ok": false' in parsed.stdout
