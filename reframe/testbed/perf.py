"""Performance variables whose names depend on the test's parameters (one per N, per np)."""
import reframe.utility.sanity as sn


def set_perf_variables(test, variables):
    """variables: {name: (unit, deferred expression)} -> test.perf_variables."""
    test.perf_variables = {name: sn.make_performance_function(expr, unit)
                           for name, (unit, expr) in variables.items()}
