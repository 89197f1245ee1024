"""The machine record: what a figure was measured on, and the two keys references use.

Machines of one type differ by tens of percent in memory bandwidth, so an absolute figure
belongs to one machine (`machine_id`), while a ratio to a baseline measured in the same job
travels to any machine of the type (`machine_type`: architecture, CPU vendor, CPU count,
virtualised or not). The vendor is in the type because ratios do not travel across it: HPL's
efficiency on an Intel VM fell outside the rows an AMD VM of the same size made
(docs/verification.md, "2026-11-25: the CPU vendor joins the machine type").
TESTBED_MACHINE_ID overrides the id (say for cloned images that share /etc/machine-id).

    python3 -m testbed.machine        prints the record as JSON
"""
import hashlib
import json
import os
import platform
import sys
from functools import lru_cache


def _read(path):
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ''


def _cpuinfo_field(name):
    for line in _read('/proc/cpuinfo').splitlines():
        if line.split(':')[0].strip() == name:
            return line.split(':', 1)[1].strip()
    return ''


def cpu_flags():
    """The CPU's feature flags (/proc/cpuinfo), empty where it lists none."""
    return set(_cpuinfo_field('flags').split())


#: /proc/cpuinfo vendor_id -> the short name in the machine type
VENDORS = {'GenuineIntel': 'intel', 'AuthenticAMD': 'amd'}


def cpu_vendor():
    """'intel', 'amd', another x86 vendor's id in lower case, or '' where /proc/cpuinfo names
    none (most other architectures)."""
    vid = _cpuinfo_field('vendor_id')
    return VENDORS.get(vid, vid.lower())


def _virtualised():
    """The hypervisor's name if the CPU says it runs under one, else ''."""
    if 'hypervisor' not in cpu_flags():
        return ''
    vendor = _read('/sys/hypervisor/type').strip() or _read('/sys/class/dmi/id/sys_vendor').strip()
    return vendor or 'yes'


@lru_cache(maxsize=1)
def record():
    mem_kib = 0
    for line in _read('/proc/meminfo').splitlines():
        if line.startswith('MemTotal:'):
            mem_kib = int(line.split()[1])
    rec = {
        'arch': platform.machine(),
        'cpu_model': _cpuinfo_field('model name') or platform.processor() or 'unknown',
        'cpu_vendor': cpu_vendor(),
        'cpus': os.cpu_count() or 0,
        'memory_bytes': mem_kib * 1024,
        'kernel': platform.release(),
        'virtualised': _virtualised() or 'no',
    }
    # Tests only (test_any_machine.py): this machine taken for a type that has no rows.
    rec['machine_type'] = os.environ.get('TESTBED_TEST_MACHINE_TYPE', '').strip() or \
        machine_type(rec)
    rec['machine_id'] = machine_id(rec)
    return rec


def machine_type(rec):
    """The key of references that travel (ratios): what every machine of the type shares."""
    virt = 'vm' if rec['virtualised'] != 'no' else 'bare'
    vendor = ''.join(c for c in rec.get('cpu_vendor', '') if c.isalnum())
    return '-'.join(p for p in (rec['arch'], vendor, f"{rec['cpus']}cpu", virt) if p)


def machine_id(rec):
    """The key of absolute references: this machine (installation, host name, CPU, memory)."""
    override = os.environ.get('TESTBED_MACHINE_ID', '').strip()
    if override:
        return override
    ident = '|'.join([_read('/etc/machine-id').strip(), platform.node(), rec['cpu_model'],
                      str(rec['cpus']), str(rec['memory_bytes'])])
    return 'm-' + hashlib.sha256(ident.encode()).hexdigest()[:12]


if __name__ == '__main__':
    json.dump(record(), sys.stdout, indent=1)
    print()
