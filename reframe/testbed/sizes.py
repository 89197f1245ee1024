"""Message-size schedules, stated independently of the C benchmark so that the tests can check
that every size the schedule promises appears in the output (apps/p2p/README.md has the same
definitions)."""


def netpipe(limit=4 * 1024 * 1024):
    """NetPIPE's schedule: 2^k and 1.5*2^k, each also at -3 and +3 bytes, 1 byte .. `limit`."""
    sizes = set()
    k = 0
    while 2 ** k <= limit:
        for base in (2 ** k, 3 * 2 ** (k - 1) if k >= 1 else None):
            if base is None:
                continue
            sizes.update(s for s in (base - 3, base, base + 3) if 1 <= s <= limit)
        k += 1
    return sorted(sizes)


SCHEDULES = {
    'small': list(range(300, 4800 + 1, 300)),
    'medium': list(range(5000, 100000 + 1, 5000)),
    'large': list(range(200000, 2000000 + 1, 100000)),
    'netpipe': netpipe(),
    'quick': [8, 1024, 65536, 1048576],
}
SCHEDULES['thesis'] = SCHEDULES['small'] + SCHEDULES['medium'] + SCHEDULES['large']
