"""The set-up makes this machine's own name resolve (pvmd and lamboot stop when it does not),
as Debian's installer does, and leaves a hosts file that already resolves it alone."""
import socket

from testbed import install


def test_a_name_that_does_not_resolve_is_added_once(tmp_path, monkeypatch):
    hosts = tmp_path / 'hosts'
    hosts.write_text('127.0.0.1 localhost\n')
    monkeypatch.setattr(socket, 'gethostname', lambda: 'fresh1')

    def lookup(name):
        if f'\t{name}\t' in hosts.read_text() or name == 'localhost':
            return '127.0.1.1'
        raise socket.gaierror(-2, 'Name or service not known')
    monkeypatch.setattr(socket, 'gethostbyname', lookup)
    log = tmp_path / 'base.log'
    assert install.ensure_hostname_resolves(log, str(hosts)) == (True, '')
    assert hosts.read_text().splitlines()[1].startswith('127.0.1.1\tfresh1\t#')
    assert 'fresh1' in log.read_text()
    assert install.ensure_hostname_resolves(log, str(hosts)) == (True, '')
    assert len(hosts.read_text().splitlines()) == 2       # resolves now: nothing added


def test_a_hosts_file_that_cannot_be_written_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(socket, 'gethostname', lambda: 'fresh1')
    monkeypatch.setattr(socket, 'gethostbyname',
                        lambda name: (_ for _ in ()).throw(socket.gaierror(-2, 'unknown')))
    ok, why = install.ensure_hostname_resolves(tmp_path / 'log',
                                                str(tmp_path / 'no' / 'such' / 'hosts'))
    assert not ok and 'no/such/hosts' in why and "'fresh1'" in why
