import argparse
import sys

from testbed.report import __doc__ as DOC, build
from testbed.report.data import ReportError


def main(argv=None):
    ap = argparse.ArgumentParser(prog='python3 -m testbed.report',
                                 description=DOC.splitlines()[0])
    ap.add_argument('reports', nargs='+', help='ReFrame JSON run reports')
    ap.add_argument('--out', default='reframe/report', help='folder for index.html')
    ap.add_argument('--no-stored', action='store_true',
                    help='leave out the stored sessions of site/versions.toml\'s releases')
    args = ap.parse_args(argv)
    try:
        path = build(args.reports, args.out, stored=not args.no_stored)
    except ReportError as err:
        print(f'error: {err}', file=sys.stderr)
        return 2
    print(f'written: {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
