"""Tests of launch_times.py that need no MPI: argument checks and statistics.
Run: python3 -m pytest -q apps/startup/test_launch_times.py"""
import json

import pytest

import launch_times as lt  # beside this file: pytest puts its folder on the path

BASE = ["--launcher", "mpiexec -n {np}", "--np", "2,4"]


def fail(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        lt.parse_args(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_defaults():
    args = lt.parse_args(BASE + ["--", "./startup", "-x"])
    assert args.np == [2, 4]
    assert args.repeats == 5 and args.timeout == 120.0
    assert args.program == ["./startup", "-x"]
    assert args.boot is None and args.halt is None and args.run_as is None
    assert args.cores >= 1


@pytest.mark.parametrize("value", ["0", "-2", "2,,4", "x", "", "2.5"])
def test_bad_np_names_option(value, capsys):
    err = fail(["--launcher", "mpiexec -n {np}", "--np", value, "./startup"], capsys)
    assert "--np" in err and repr(value) in err


@pytest.mark.parametrize("option,value", [("--repeats", "-1"), ("--repeats", "two"),
                                          ("--timeout", "0"), ("--timeout", "soon"),
                                          ("--cores", "0")])
def test_bad_numbers_name_option(option, value, capsys):
    err = fail(BASE + [option, value, "./startup"], capsys)
    assert option in err and value in err


def test_launcher_needs_np(capsys):
    err = fail(["--launcher", "mpiexec -n 2", "--np", "2", "./startup"], capsys)
    assert "--launcher" in err and "{np}" in err


def test_unknown_user(capsys):
    err = fail(BASE + ["--run-as", "no-such-user-here", "./startup"], capsys)
    assert "--run-as" in err


def test_program_required(capsys):
    assert "program" in fail(BASE, capsys)


def test_as_user_prefix():
    assert lt.as_user(["a", "b"], None) == ["a", "b"]
    cmd = lt.as_user(["a"], "root")
    assert cmd[0] == "setpriv" and "--reuid=root" in cmd and cmd[-1] == "a"


def test_parse_startup_line():
    rec = {"ranks": 2, "init_s_max": 0.5, "init_s_min": 0.4, "first_message_s": 0.6,
           "library_version": "x \"y\""}
    out = "# noise\nSTARTUP " + json.dumps(rec) + "\n"
    assert lt.parse_startup(out) == rec
    assert lt.parse_startup("STARTUP-BOOT {}\nnothing\n") is None


def rec(np, kind, init, first, exit_, over=False):
    return {"np": np, "launch": kind, "init_s": init, "first_message_s": first,
            "exit_s": exit_, "oversubscribed": over}


def test_summarize_cold_apart_from_warm_median():
    records = [rec(2, "cold", 9.0, 9.5, 10.0),
               rec(2, "warm", 1.0, 1.1, 2.0), rec(2, "warm", 3.0, 3.1, 4.0),
               rec(2, "warm", 2.0, 2.1, 3.0),
               rec(4, "cold", 5.0, 5.5, 6.0, True),
               rec(4, "warm", 1.0, 1.5, 2.0, True), rec(4, "warm", 2.0, 2.5, 3.0, True)]
    rows = lt.summarize(records)
    assert [r["np"] for r in rows] == [2, 4]
    two, four = rows
    assert two["cold_init_s"] == 9.0 and two["cold_exit_s"] == 10.0  # not mixed into warm
    assert two["warm_median_init_s"] == 2.0 and two["warm_median_exit_s"] == 3.0
    assert two["warm_n"] == 3 and two["oversubscribed"] is False
    assert four["warm_median_first_message_s"] == 2.0  # even count: mean of the middle two
    assert four["oversubscribed"] is True


def test_summarize_without_warm_and_table():
    rows = lt.summarize([rec(8, "cold", 1.0, 1.2, 1.5, True)])
    assert rows[0]["warm_n"] == 0 and rows[0]["warm_median_init_s"] is None
    line = lt.format_table(rows).splitlines()[-1].split()
    assert line[:3] == ["8", "yes", "|"] and line[3:6] == ["1.000", "1.200", "1.500"]
    assert line[7:] == ["-", "-", "-", "0"]
