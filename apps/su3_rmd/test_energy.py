"""The README's promise: the leapfrog conserves H = -sum Tr P^2 + S up to O(epsilon^2), so at a
fixed trajectory length the energy violation |dH| of each trajectory falls about 4x when the
step size halves. Runs su3_rmd on 1 rank (an MPI singleton, no launcher).
Run: python3 -m pytest -q apps/su3_rmd/test_energy.py (the build: conftest.py)"""
import json
import subprocess

def energy_violations(exe, eps, steps):
    out = subprocess.run([str(exe), '--lattice', '4x4x4x8', '--trajectories', '3', '--seed', '7',
                          '--epsilon', str(eps), '--steps', str(steps)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    trajs = [json.loads(line.split(' ', 1)[1]) for line in out.splitlines()
             if line.startswith('SU3-TRAJ ')]
    assert trajs[0]['dH'] is None             # the cold start has no dynamics
    return [abs(t['dH']) for t in trajs[1:]]


def test_energy_violation_shrinks_as_epsilon_squared(su3):
    coarse = energy_violations(su3, 0.02, 20)    # trajectory length 0.4 both times
    fine = energy_violations(su3, 0.01, 40)
    assert len(coarse) == len(fine) == 3
    for c, f in zip(coarse, fine):
        assert 3.5 < c / f < 4.5, (coarse, fine)
    assert coarse[0] < 10                        # and it is small against H ~ 10^4
