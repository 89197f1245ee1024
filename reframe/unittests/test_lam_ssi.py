"""LAM's knobs are checked from what each rank prints with rpi_verbose (testbed/lam_ssi.py)."""
from testbed import lam_ssi

# two ranks of Debian's LAM 7.1.4, usysv selected, the short limit set to 65432 (abridged)
SAID = """n0<8966> ssi:rpi:open: verbosity:5
n0<8966> ssi:rpi:usysv: module initializing
n0<8966> ssi:rpi:usysv:short: 65432 bytes
n0<8966> ssi:rpi:tcp:short: 65432 bytes
n0<8967> ssi:rpi:usysv:short: 65432 bytes
n0<8967> ssi:rpi:tcp:short: 65432 bytes
n0<8966> ssi:rpi: selected RPI module usysv
n0<8967> ssi:rpi: selected RPI module usysv
KNOB-UNSUPPORTED {"reason":"MPI-1.2 library: no MPI_T"}
"""
ENV = {'LAM_MPI_SSI_rpi': 'usysv', 'LAM_MPI_SSI_rpi_usysv_short': '65432',
       'LAM_MPI_SSI_rpi_sysv_short': '65432', 'LAM_MPI_SSI_rpi_tcp_short': '65432',
       'LAM_MPI_SESSION_SUFFIX': 'x'}


def test_expected_names_the_module_and_its_parameters():
    assert lam_ssi.expected(ENV) == {'rpi': 'usysv', 'usysv:short': '65432',
                                     'sysv:short': '65432', 'tcp:short': '65432'}
    assert lam_ssi.expected({'MPIR_CVAR_X': '1'}) == {}


def test_values_that_reached_every_rank_pass():
    assert lam_ssi.reach_problem(SAID, lam_ssi.expected(ENV), 2) is None


def test_a_rank_with_another_value_or_module_fails_naming_it():
    want = lam_ssi.expected(dict(ENV, LAM_MPI_SSI_rpi_usysv_short='8192'))
    assert 'usysv:short' in lam_ssi.reach_problem(SAID, want, 2)
    want = lam_ssi.expected(dict(ENV, LAM_MPI_SSI_rpi='sysv'))
    assert "rpi = 'usysv', set to 'sysv'" in lam_ssi.reach_problem(SAID, want, 2)


def test_a_rank_that_said_nothing_fails():
    one = '\n'.join(line for line in SAID.splitlines() if '8967' not in line)
    assert '1 processes' in lam_ssi.reach_problem(one, lam_ssi.expected(ENV), 2)
