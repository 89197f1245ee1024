"""Headless Chromium (Debian package `chromium`, installed by the set-up) as the report's
reader: screenshots, the DOM after rendering, and the console errors of a page.

    python3 -m testbed.report.browser reframe/report
takes reframe/report/first-screen.png (index.html) and series.png (series.html)."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

# Chromium 156 prints console messages as '...:INFO:CONSOLE:1] "text", source: ...' under
# --enable-logging (older ones 'CONSOLE(1)]'); an exception no script caught reads 'Uncaught'.
# The page has no script, so any console line at all is a fault.
CONSOLE = re.compile(r'.*CONSOLE[:(]\d+\)?\].*|.*Uncaught.*')
WINDOW = '1400,1000'


class BrowserMissing(RuntimeError):
    pass


def executable():
    found = shutil.which('chromium')
    if not found:
        raise BrowserMissing('chromium not found: run the set-up (make setup, as root), which '
                             'installs the Debian package chromium (step "report browser")')
    return found


def run(page, *args, timeout=60):
    """Chromium on one page; returns (stdout, console error lines)."""
    with tempfile.TemporaryDirectory(prefix='report-chromium-') as profile:
        cmd = [executable(), '--headless', '--disable-gpu', '--hide-scrollbars',
               '--no-first-run', f'--user-data-dir={profile}', '--enable-logging=stderr',
               '--v=0', f'--window-size={WINDOW}', *args, Path(page).resolve().as_uri()]
        if os.geteuid() == 0:                   # Chromium refuses root without it
            cmd.insert(2, '--no-sandbox')
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f'chromium exited {proc.returncode} on {page}: '
                           + proc.stderr.strip()[-500:])
    return proc.stdout, [m.group(0) for m in CONSOLE.finditer(proc.stderr)]


def screenshot(page, png):
    """The first screen of `page` as `png`; returns the console errors."""
    _, errors = run(page, f'--screenshot={Path(png).resolve()}')
    return errors


def dom(page):
    """(the DOM after rendering, console errors)."""
    return run(page, '--dump-dom')


def png_is_blank(png):
    """True when the image's decoded rows hold almost one value (a white page): enough to catch
    a screenshot taken of nothing, without an imaging library."""
    raw, pos, idat = Path(png).read_bytes(), 8, b''
    while pos < len(raw):
        n = int.from_bytes(raw[pos:pos + 4], 'big')
        if raw[pos + 4:pos + 8] == b'IDAT':
            idat += raw[pos + 8:pos + 8 + n]
        pos += 12 + n
    pixels = zlib.decompress(idat)
    return len(set(pixels[::7])) < 8


def shots(folder):
    """first-screen.png of index.html and series.png of series.html in `folder`."""
    folder = Path(folder)
    out = {}
    for page, png in (('index.html', 'first-screen.png'), ('series.html', 'series.png')):
        errors = screenshot(folder / page, folder / png)
        out[folder / png] = errors
    return out


if __name__ == '__main__':
    try:
        for png, errors in shots(sys.argv[1] if len(sys.argv) > 1 else 'reframe/report').items():
            print(f'screenshot: {png}' + (f' (console: {errors})' if errors else ''))
    except (BrowserMissing, RuntimeError, subprocess.TimeoutExpired) as err:
        print(f'error: {err}', file=sys.stderr)
        sys.exit(2)
