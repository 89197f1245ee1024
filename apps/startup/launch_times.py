#!/usr/bin/env python3
"""Time MPI job start-up: launch -> MPI_Init -> first message -> exit.

Usage (see README.md):
  python3 launch_times.py --launcher "mpiexec.mpich -n {np}" --np 2,4,8 --repeats 5 \
      [--boot lamboot --halt lamhalt] [--run-as USER] [--json FILE] -- ./startup

For each np the first launch is 'cold', the next --repeats are 'warm'.  The
launch time is read (time.time_ns(), CLOCK_REALTIME) just before the launcher
is started and handed to the program, which reports MPI_Init and first-message
times against it; the exit time is read when the launcher returns.
A daemon boot (--boot) is timed on its own, once, before any launch; --halt is
always run at the end, even after a failure.  Python 3.11 standard library only.
"""
import argparse
import json
import os
import pwd
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

FIELDS = ("init_s", "first_message_s", "exit_s")


class LaunchError(RuntimeError):
    pass


def parse_np(text):
    """'2,4,8' -> [2, 4, 8]; any bad item names the option and the value."""
    items = text.split(",")
    try:
        values = [int(item) for item in items]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of positive integers (e.g. 2,4,8)")
    return values


def non_negative(text):
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 0")
    return value


def positive_seconds(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of seconds > 0")
    return value


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Time MPI start-up (launch to MPI_Init, first message, exit).",
        epilog="Open MPI needs --oversubscribe in --launcher when np exceeds the cores.")
    p.add_argument("--launcher", required=True,
                   help='launcher command with {np}, e.g. "mpiexec.mpich -n {np}"')
    p.add_argument("--np", required=True, type=parse_np, help="process counts, e.g. 2,4,8")
    p.add_argument("--repeats", type=non_negative, default=5,
                   help="warm launches after the cold one, per np (default 5)")
    p.add_argument("--boot", help='daemon boot command, timed once before the launches (e.g. "lamboot")')
    p.add_argument("--halt", help='daemon halt command, always run at the end (e.g. "lamhalt")')
    p.add_argument("--run-as", metavar="USER", help="run every command as this user (needs root)")
    p.add_argument("--timeout", type=positive_seconds, default=120.0,
                   help="seconds before any one command is killed (default 120)")
    p.add_argument("--cores", type=non_negative, default=None,
                   help="cores available; np above it is 'oversubscribed' (default: this process's CPU set)")
    p.add_argument("--json", metavar="FILE", help="also write all records and the summary here")
    p.add_argument("program", nargs="+", help="the startup program and its own arguments (after --)")
    args = p.parse_args(argv)
    if "{np}" not in args.launcher:
        p.error(f"argument --launcher: {args.launcher!r} does not contain {{np}}")
    try:
        shlex.split(args.launcher.format(np=1))
    except (ValueError, KeyError, IndexError) as exc:
        p.error(f"argument --launcher: {args.launcher!r}: {exc}")
    if args.run_as is not None:
        try:
            pwd.getpwnam(args.run_as)
        except KeyError:
            p.error(f"argument --run-as: no such user {args.run_as!r}")
    if args.cores == 0:
        p.error("argument --cores: '0' is not an integer >= 1")
    if args.cores is None:
        args.cores = len(os.sched_getaffinity(0))
    return args


def as_user(cmd, user):
    """Prefix cmd so that it runs as user, with that user's HOME (the MPI rule)."""
    if user is None:
        return cmd
    home = pwd.getpwnam(user).pw_dir
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups",
            "env", f"HOME={home}"] + cmd


def run(cmd, timeout):
    """Run cmd in its own process group; kill the whole group on time-out.
    Returns (returncode, stdout, stderr)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise LaunchError(f"timed out after {timeout:g} s and killed: {shlex.join(cmd)}")
    return proc.returncode, out, err


def run_daemon_cmd(command, user, timeout):
    """lamboot/lamhalt leave daemons behind that inherit stdout: their output
    goes to a file, never a pipe, or reading the pipe waits for the daemons."""
    cmd = as_user(shlex.split(command), user)
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise LaunchError(f"timed out after {timeout:g} s and killed: {command}")
        if rc != 0:
            log.seek(0)
            tail = "\n".join(log.read().strip().splitlines()[-10:])
            raise LaunchError(f"command failed with status {rc}: {command}\n{tail}")


def parse_startup(stdout):
    """The program's STARTUP record, or None."""
    for line in stdout.splitlines():
        if line.startswith("STARTUP "):
            return json.loads(line[len("STARTUP "):])
    return None


def launch_once(args, np, kind):
    cmd = shlex.split(args.launcher.format(np=np)) + list(args.program)
    launch_ns = time.time_ns()  # as late as possible before the launcher starts
    full = as_user(cmd + ["--launch-epoch-ns", str(launch_ns)], args.run_as)
    rc, out, err = run(full, args.timeout)
    exit_ns = time.time_ns()
    rec = parse_startup(out)
    if rc != 0 or rec is None:
        tail = "\n".join((err or out).strip().splitlines()[-10:])
        raise LaunchError(f"np={np} {kind} launch failed (status {rc}"
                          f"{', no STARTUP line' if rec is None else ''}): {shlex.join(cmd)}\n{tail}")
    if rec["ranks"] != np:
        raise LaunchError(f"np={np} {kind} launch ran {rec['ranks']} ranks: {shlex.join(cmd)}")
    return {"np": np, "launch": kind,
            "init_s": rec["init_s_max"],  # the slowest rank decides when the job is up
            "init_s_min": rec["init_s_min"],  # the spread shows ranks started one by one
            "first_message_s": rec["first_message_s"],
            "exit_s": round((exit_ns - launch_ns) / 1e9, 6),
            "oversubscribed": np > args.cores,
            "library_version": rec["library_version"]}


def summarize(records):
    """Per np: the cold launch apart, the warm ones as median and count."""
    rows = []
    for np in sorted({r["np"] for r in records}):
        mine = [r for r in records if r["np"] == np]
        cold = next((r for r in mine if r["launch"] == "cold"), None)
        warm = [r for r in mine if r["launch"] == "warm"]
        row = {"np": np, "oversubscribed": mine[0]["oversubscribed"], "warm_n": len(warm)}
        for f in FIELDS:
            row[f"cold_{f}"] = cold[f] if cold else None
            row[f"warm_median_{f}"] = statistics.median(r[f] for r in warm) if warm else None
        rows.append(row)
    return rows


def format_table(rows):
    def num(v):
        return f"{v:9.3f}" if v is not None else f"{'-':>9}"
    lines = ["# start-up times in seconds since launch; init = slowest rank's MPI_Init return",
             "#   np over | cold: init   first    exit | warm median: init   first    exit    n"]
    for r in rows:
        lines.append(f"  {r['np']:4d} {'yes' if r['oversubscribed'] else 'no':>4} |"
                     f"{num(r['cold_init_s'])}{num(r['cold_first_message_s'])}{num(r['cold_exit_s'])} |"
                     f"      {num(r['warm_median_init_s'])}{num(r['warm_median_first_message_s'])}"
                     f"{num(r['warm_median_exit_s'])} {r['warm_n']:4d}")
    return "\n".join(lines)


def emit(tag, obj):
    print(f"{tag} {json.dumps(obj)}", flush=True)


def main(argv=None):
    args = parse_args(argv)
    boot = {"boot_s": None, "boot_command": args.boot}
    records, errors = [], []
    try:
        if args.boot:
            t0 = time.monotonic_ns()
            run_daemon_cmd(args.boot, args.run_as, args.timeout)
            boot["boot_s"] = round((time.monotonic_ns() - t0) / 1e9, 6)
        emit("STARTUP-BOOT", boot)
        for np in args.np:
            for i in range(1 + args.repeats):
                rec = launch_once(args, np, "cold" if i == 0 else "warm")
                records.append(rec)
                emit("STARTUP-LAUNCH", rec)
    except LaunchError as exc:
        errors.append(str(exc))
    finally:
        if args.halt:  # even after a failure: never leave daemons behind
            try:
                run_daemon_cmd(args.halt, args.run_as, args.timeout)
            except LaunchError as exc:
                errors.append(str(exc))
    for e in errors:
        print(f"launch_times: {e}", file=sys.stderr)
    rows = summarize(records)
    print(format_table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"launcher": args.launcher, "program": args.program, "cores": args.cores,
                       "repeats": args.repeats, "boot": boot, "launches": records,
                       "summary": rows, "errors": errors}, fh, indent=1)
            fh.write("\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
