"""The summary sets PVM's start-up (PvmStartup) beside the MPI stacks' (StartupTime)."""
from testbed import summary


def startup_case(test, stack, first, result='pass'):
    return {'name': f'{test} /abcd1234', 'environ': stack, 'stack_name': stack,
            'result': result, 'reference_case': 'launch',
            'perfvalues': {f'testbed-local:default:first_np{n}': [v, None, None, None, 's',
                                                                  'pass']
                           for n, v in first.items()}}


def test_pvm_spawn_beside_the_mpi_launches_per_np():
    report = {'runs': [{'testcases': [
        startup_case('StartupTime', 'mpich-4.0', {2: 0.05, 4: 0.09}),
        startup_case('PvmStartup', 'pvm-3.4', {2: 0.0063, 4: 0.019}),
        startup_case('StartupTime', 'lam-7.1', {2: 9.0}, result='fail')]}]}
    text, _ = summary.render(report)
    assert '| ranks | mpich-4.0 | pvm-3.4 |' in text
    assert '| 2 | 0.0500 | 0.0063 |' in text
    assert '| 4 | 0.0900 | 0.0190 |' in text
    # a failed case's figure is not set beside the others
    assert '9.0000' not in text


def test_no_start_up_case_no_table():
    assert 'Start-up: to a first message' not in summary.render({'runs': [{'testcases': []}]})[0]
