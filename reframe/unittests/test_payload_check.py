"""The one rule every timing test proves its payloads by (testbed.checks.payload_problem): each
sample checks a received message on each receiving rank."""
from testbed.checks import payload_problem


def rec(transport, size, checked, **extra):
    return {'transport': transport, 'size_bytes': size, 'checked_messages': checked, **extra}


def test_enough_checked_messages_hold():
    rows = [rec('mpi', 8, 60), rec('tcp', 1024, 61)]
    assert payload_problem(rows, 30) is None


def test_the_first_short_record_is_named_with_its_count_and_the_least():
    rows = [rec('mpi', 8, 60), rec('mpi', 65536, 59), rec('tcp', 8, 0)]
    assert payload_problem(rows, 30) == \
        'mpi 65536 bytes: 59 messages payload-checked, fewer than 60'


def test_a_label_and_a_per_record_least():
    rows = [rec('memcpy', 8, 30), rec('pvm', 8, 40, pair='send-recv', variant='direct-raw')]
    one_for_memcpy = lambda r: 1 if r['transport'] == 'memcpy' else 2   # noqa: E731
    line = payload_problem(rows, 30, lambda r: f"{r.get('pair')} {r.get('variant')}",
                           per_sample=one_for_memcpy)
    assert line == 'send-recv direct-raw 8 bytes: 40 messages payload-checked, fewer than 60'
