"""Performance variables: one record field as a deferred figure, and perf variables whose
names depend on the test's parameters (one per N, per np)."""
import reframe.utility.sanity as sn


@sn.deferrable
def lookup(rows, key, value, field, what):
    """`field` of the record whose `key` is `value`; `rows` is a callable that reads the
    records once the run has produced them. `what` names the records in the error."""
    for row in rows():
        if row[key] == value:
            return row[field]
    raise ValueError(f'no {what} with {key}={value}')


def set_perf_variables(test, variables):
    """variables: {name: (unit, deferred expression)} -> test.perf_variables."""
    test.perf_variables = {name: sn.make_performance_function(expr, unit)
                           for name, (unit, expr) in variables.items()}
