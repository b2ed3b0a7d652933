"""What a hostile template child (an LLM's dataloader, training code) tries against the store:
for tests/test_store_confinement.py. ``attack(...)`` returns ``name:open`` or ``name:refused``
per attempt; every one must be refused under the template policy. Run as ``python -m
core.config.launch tests.store_probe JSON`` or executed from a dataloader's source (the code
uses nothing but the standard library)."""
import json
import os
import sqlite3
import sys


def attack(store: str, victim: str, workspace: str, planted_link: str,
           other_files: list) -> list:
    report = []
    scratch = os.path.join(workspace, "Datapath")

    def attempt(name, act):
        try:
            act()
            report.append(f"{name}:open")
        except Exception:  # noqa: BLE001 - any failure is a refusal
            report.append(f"{name}:refused")

    def tamper(path, uri=False):
        con = sqlite3.connect(path, uri=uri, timeout=1, isolation_level=None)
        try:
            con.execute("UPDATE jobs SET status = 'succeeded', error = '' WHERE id = ?",
                        (victim,))
            con.execute("DELETE FROM audit")
            if con.total_changes == 0:
                raise RuntimeError("nothing changed")
        finally:
            con.close()

    def rw_open(path):
        os.close(os.open(path, os.O_RDWR))

    def read(path):
        with open(path, "rb") as fh:
            fh.read(16)

    def via_new_link(make):
        target = os.path.join(scratch, f"via_{make.__name__}.db")
        make(store, target)
        tamper(target)

    def replace_store():
        forged = os.path.join(scratch, "forged.db")
        sqlite3.connect(forged).close()
        os.replace(forged, store)

    def inherited_fd():
        wanted = set()
        for suffix in ("", "-wal", "-shm"):
            try:
                st = os.stat(store + suffix)
                wanted.add((st.st_dev, st.st_ino))
            except OSError:
                pass
        for fd in range(3, 1024):
            try:
                st = os.fstat(fd)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in wanted:
                os.pwrite(fd, b"", 0)
                return
        raise LookupError("no descriptor of the store")

    def parent_fds():
        folder = f"/proc/{os.getppid()}/fd"
        for name in os.listdir(folder):
            try:
                if os.path.realpath(os.path.join(folder, name)).startswith(store):
                    rw_open(os.path.join(folder, name))
                    return
            except OSError:
                continue
        raise LookupError("no descriptor of the store")

    attempt("read", lambda: read(store))
    attempt("rw_open", lambda: rw_open(store))
    attempt("sql", lambda: tamper(store))
    attempt("sql_uri", lambda: tamper(f"file:{store}?mode=rw", uri=True))
    attempt("planted_link", lambda: tamper(planted_link))
    attempt("planted_link_rw", lambda: rw_open(planted_link))
    attempt("symlink", lambda: via_new_link(os.symlink))
    attempt("hardlink", lambda: via_new_link(os.link))
    attempt("rename_out", lambda: os.rename(store, os.path.join(scratch, "moved.db")))
    attempt("replace_in", replace_store)
    attempt("truncate", lambda: os.truncate(store, 0))
    attempt("wal_rw", lambda: rw_open(store + "-wal"))
    attempt("shm_rw", lambda: rw_open(store + "-shm"))
    attempt("wal_unlink", lambda: os.unlink(store + "-wal"))
    attempt("journal_create", lambda: os.close(os.open(store + "-journal",
                                                       os.O_CREAT | os.O_WRONLY, 0o644)))
    attempt("proc_self_root", lambda: rw_open(f"/proc/self/root{store}"))
    attempt("proc_parent_fd", parent_fds)
    attempt("inherited_fd", inherited_fd)
    for i, path in enumerate(other_files):
        attempt(f"other{i}_rw", lambda p=path: rw_open(p))
    return report


if __name__ == "__main__":
    print("STOREPROBE " + " ".join(attack(**json.loads(sys.argv[1]))), flush=True)
