"""What LAM/MPI says each rank runs with. LAM 7.1 has no MPI tool interface; with the SSI
parameter rpi_verbose at level 5 every process prints, at MPI_Init, the point-to-point module
(RPI) it selected and the parameters that module and tcp took, one line each:

    n0<8966> ssi:rpi: selected RPI module usysv
    n0<8966> ssi:rpi:usysv:short: 65432 bytes

(seen with Debian's lam-runtime 7.1.4; docs/verification.md, 2026-11-28 (night)). KnobReach reads
them to check that the knobs, SSI parameters in the environment (LAM_MPI_SSI_<name>), reached
every rank."""
import re

#: the variable that makes every process say what it runs with
VERBOSE = {'LAM_MPI_SSI_rpi_verbose': 'level:5'}

_LINE = re.compile(r'^n(\d+)<(\d+)> ssi:rpi:(?: selected RPI module (\w+)$|(\w+):(\w+): (\S+))')


def expected(env):
    """LAM's name -> the value set, for the knobs' SSI variables in `env`: 'rpi' for the module
    (LAM_MPI_SSI_rpi), '<module>:<param>' for a module's parameter (LAM_MPI_SSI_rpi_usysv_short
    -> 'usysv:short')."""
    out = {}
    for name, value in env.items():
        if name == 'LAM_MPI_SSI_rpi':
            out['rpi'] = value
        elif name.startswith('LAM_MPI_SSI_rpi_'):
            module, _, param = name[len('LAM_MPI_SSI_rpi_'):].partition('_')
            if param:
                out[f'{module}:{param}'] = value
    return out


def reported(text):
    """(node, pid) of each process that selected a module -> {LAM's name: value} it printed."""
    procs = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        node, pid, selected, module, param, value = m.groups()
        mine = procs.setdefault((int(node), int(pid)), {})
        if selected:
            mine['rpi'] = selected
        else:
            mine[f'{module}:{param}'] = value
    return {p: v for p, v in procs.items() if 'rpi' in v}


def reach_problem(text, want, ntasks):
    """Why the values `want` (expected()) did not reach all `ntasks` ranks, or None."""
    procs = reported(text)
    if len(procs) != ntasks:
        return (f'{len(procs)} processes said which RPI module they selected (rpi_verbose), '
                f'not {ntasks}: cannot tell whether the knobs reached every rank')
    for (node, pid), said in sorted(procs.items()):
        for name, value in sorted(want.items()):
            if name in said and said[name] != value:
                return (f'n{node}<{pid}>: {name} = {said[name]!r}, set to {value!r}: the '
                        f'setting did not reach the rank')
    return None
