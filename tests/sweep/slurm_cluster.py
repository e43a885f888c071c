"""A real single-node Slurm cluster on 127.0.0.1, started in a private temporary folder, for the Slurm tests.

Debian's Slurm (22.05) runs here as it would on a cluster: its own MUNGE daemon and key, ``slurmctld`` and
``slurmd`` on free ports, and accounting in ``slurmdbd`` over a private MariaDB, so that ``sacct`` (which submitit
asks for a job's state) answers. Everything lives in one folder under /tmp (the MUNGE socket's path must stay short
and every folder above it must be searchable by all) and goes away on :meth:`SlurmCluster.stop`.

The settings that make the tests fast and deterministic, each a departure from a real cluster's defaults:

- ``KillWait=5``: a job's processes get SIGKILL 5 s after SIGTERM (a cluster's default is 30 s).
- ``AuthInfo=...,cred_expire=10``: a requeued job may start again 10 s after its requeue (default 120 s).
- ``SchedulerParameters=sched_interval=1,bf_interval=1``: the scheduler looks at pending jobs every second.
- ``MinJobAge=3600``: ``scontrol show job`` still shows a finished job for an hour.
- ``ProctrackType=proctrack/linuxproc``: a job's processes are found by parentage, not by cgroup (containers
  rarely let a daemon create cgroups). A process whose parent exits is reparented to init and so leaves the job:
  Slurm no longer signals it. :meth:`SlurmCluster.stop` ends such strays.

Only one cluster runs on a machine at a time (two pytest-xdist workers would otherwise start two): :func:`start`
takes an exclusive ``flock`` on :data:`LOCK` and holds it until :meth:`SlurmCluster.stop`.

By hand: ``python3 -m tests.sweep.slurm_cluster`` starts one, prints the ``export SLURM_CONF=...`` line for another
shell, and stops it on Enter (or end of input).
"""

from __future__ import annotations

import fcntl
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

# The daemons and clients the cluster needs (Debian packages: slurmctld slurmd slurm-client munge slurmdbd
# mariadb-server), installed by .ci/run.
BINARIES = ("munged", "mariadb-install-db", "mariadbd", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sinfo",
            "sbatch", "squeue", "scontrol", "sacct", "scancel", "srun")
# Debian puts the daemons in /usr/sbin, which a non-login PATH may lack.
SBIN = ("/usr/sbin", "/sbin")

LOCK = Path("/tmp/ablate-slurm-cluster.lock")
LOCK_DEADLINE_S = 1800  # another worker's cluster lives for its test module
START_DEADLINE_S = 120
STOP_DEADLINE_S = 60

CLUSTER_NAME = "ablate"
PARTITION = "debug"
KILL_WAIT_S = 5
CRED_EXPIRE_S = 10  # also how long a requeued job waits before it may start again
DEF_MEM_PER_CPU_MB = 256
RESERVED_MEMORY_MB = 2048  # RealMemory is the detected memory less this (the machine runs other things)


def missing() -> str | None:
    """Why no cluster can start here (a binary not installed), or None."""
    path = _path()
    absent = [name for name in BINARIES if shutil.which(name, path=path) is None]
    return f"{', '.join(absent)} not installed: .ci/run installs them" if absent else None


@dataclass
class SlurmCluster:
    """A running cluster: clients reach it with :attr:`env` (``SLURM_CONF`` and ``PATH``)."""

    folder: Path
    conf: Path
    node: str
    partition: str
    env: dict[str, str]
    started_in_s: float = 0.0
    _procs: list[tuple[str, subprocess.Popen]] = field(default_factory=list, repr=False)
    _lock: object = field(default=None, repr=False)

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        """A Slurm client command (``sbatch``, ``squeue``, ...) against this cluster, its output as text."""
        return subprocess.run(list(args), env={**os.environ, **self.env}, capture_output=True, text=True,
                              check=check, timeout=timeout)

    def stop(self) -> None:
        """Cancels every job, stops the daemons (the last started first), ends any process a job left behind,
        removes the folder and releases :data:`LOCK`."""
        try:
            if self._procs and all(proc.poll() is None for _, proc in self._procs):
                self._cancel_jobs()
            for _, proc in reversed(self._procs):
                _terminate(proc)
            for pid in _processes_with(f"SLURM_CONF={self.conf}"):
                _kill(pid)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
            if self._lock is not None:
                self._lock.close()  # releases the flock
                self._lock = None

    def _cancel_jobs(self) -> None:
        self.run("scancel", "--user", _user(), check=False)
        deadline = time.monotonic() + STOP_DEADLINE_S
        while self.run("squeue", "-h", "-o", "%i", check=False).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.2)


def start(prefix: str = "ablate-slurm-") -> SlurmCluster:
    """Starts a cluster in a new folder under /tmp and waits until its node is idle.

    Returns:
        The running cluster; the caller must call its ``stop()``.

    Raises:
        RuntimeError: a binary is missing, :data:`LOCK` stays held past :data:`LOCK_DEADLINE_S`, or a daemon
            does not come up within :data:`START_DEADLINE_S` (the message names it and quotes its log).
    """
    reason = missing()
    if reason:
        raise RuntimeError(reason)
    lock = _take_lock()
    began = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    folder.chmod(0o755)  # munged: every folder above its socket must be searchable by all
    node = socket.gethostname().split(".")[0]
    cluster = SlurmCluster(folder=folder, conf=folder / "slurm.conf", node=node, partition=PARTITION,
                           env={"SLURM_CONF": str(folder / "slurm.conf"), "PATH": _path()}, _lock=lock)
    try:
        _launch(cluster)
    except BaseException:
        cluster.stop()
        raise
    cluster.started_in_s = time.monotonic() - began
    print(f"slurm cluster: started in {cluster.started_in_s:.1f} s ({folder})", file=sys.stderr, flush=True)
    return cluster


def _launch(cluster: SlurmCluster) -> None:
    """Writes the key and configuration files, then starts munged, MariaDB, slurmdbd, slurmctld and slurmd."""
    folder, env = cluster.folder, {**os.environ, **cluster.env}
    for sub in ("munge", "db", "state", "spool", "log"):
        (folder / sub).mkdir()
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    ctld_port, slurmd_port, dbd_port, db_port = _free_ports(4)
    cluster.conf.write_text(_slurm_conf(folder, cluster.node, _hardware(env), ctld_port, slurmd_port, dbd_port))
    dbd_conf = folder / "slurmdbd.conf"  # slurmdbd reads it beside $SLURM_CONF; it must be private
    dbd_conf.write_text(_slurmdbd_conf(folder, dbd_port, db_port))
    dbd_conf.chmod(0o600)

    munge = folder / "munge"
    _daemon(cluster, "munged", ["munged", "-F", f"--socket={munge / 'socket'}", f"--key-file={key}",
                                f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                                f"--seed-file={munge / 'munged.seed'}"], env)
    _await(cluster, "munged's socket", lambda: (munge / "socket").is_socket())

    db = folder / "db"
    subprocess.run(["mariadb-install-db", "--no-defaults", f"--datadir={db}", "--user=root",
                    "--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-log-file-size=8M"],
                   env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True, timeout=START_DEADLINE_S)
    _daemon(cluster, "mariadbd", ["mariadbd", "--no-defaults", f"--datadir={db}", "--user=root",
                                  f"--socket={folder / 'db.sock'}", f"--port={db_port}", "--bind-address=127.0.0.1",
                                  f"--pid-file={folder / 'db.pid'}", "--innodb-buffer-pool-size=32M",
                                  "--innodb-log-file-size=8M", "--skip-log-bin"], env)
    _await(cluster, "MariaDB", lambda: _succeeds(["mariadb", "--no-defaults", f"--socket={folder / 'db.sock'}",
                                                    "-uroot", "-e", "select 1"], env))
    _daemon(cluster, "slurmdbd", ["slurmdbd", "-D"], env)
    _await(cluster, "slurmdbd's port", lambda: _listening(dbd_port))
    _daemon(cluster, "slurmctld", ["slurmctld", "-D", "-f", str(cluster.conf)], env)
    _daemon(cluster, "slurmd", ["slurmd", "-D", "-f", str(cluster.conf), "-N", cluster.node], env)
    _await(cluster, f"node {cluster.node} idle in sinfo",
           lambda: cluster.run("sinfo", "-h", "-n", cluster.node, "-o", "%T", check=False).stdout.strip() == "idle")


def _slurm_conf(folder: Path, node: str, hardware: dict[str, int], ctld_port: int, slurmd_port: int,
                dbd_port: int) -> str:
    """slurm.conf: one node of this machine's cores and one default partition; see the module docstring."""
    munge = folder / "munge" / "socket"
    cores = " ".join(f"{k}={v}" for k, v in hardware.items() if k != "RealMemory")
    memory = max(hardware["RealMemory"] - RESERVED_MEMORY_MB, hardware["RealMemory"] // 2)
    return f"""\
ClusterName={CLUSTER_NAME}
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge},cred_expire={CRED_EXPIRE_S}
StateSaveLocation={folder / 'state'}
SlurmdSpoolDir={folder / 'spool'}
SlurmctldPidFile={folder / 'slurmctld.pid'}
SlurmdPidFile={folder / 'slurmd.pid'}
SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}
SlurmdLogFile={folder / 'log' / 'slurmd.log'}
MailProg=/bin/true
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd_port}
AccountingStoragePass={munge}
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU={DEF_MEM_PER_CPU_MB}
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SlurmdParameters=config_overrides
JobRequeue=1
KillWait={KILL_WAIT_S}
MinJobAge=3600
SlurmctldTimeout=30
SlurmdTimeout=30
ReturnToService=2
NodeName={node} NodeAddr=127.0.0.1 {cores} RealMemory={memory} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def _slurmdbd_conf(folder: Path, dbd_port: int, db_port: int) -> str:
    """slurmdbd.conf: the accounting daemon on 127.0.0.1, storing into the private MariaDB as its root."""
    return f"""\
AuthType=auth/munge
AuthInfo=socket={folder / 'munge' / 'socket'}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
PidFile={folder / 'slurmdbd.pid'}
LogFile={folder / 'log' / 'slurmdbd.log'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
"""


def _hardware(env: dict[str, str]) -> dict[str, int]:
    """The node line's hardware as ``slurmd -C`` detects it (all the machine's cores, whatever this process's
    affinity): CPUs, Boards, SocketsPerBoard, CoresPerSocket, ThreadsPerCore, RealMemory (MB)."""
    out = subprocess.run(["slurmd", "-C"], env=env, capture_output=True, text=True, check=True, timeout=60).stdout
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    return {k: int(re.search(rf"\b{k}=(\d+)", out).group(1)) for k in keys}


def _daemon(cluster: SlurmCluster, name: str, cmd: list[str], env: dict[str, str]) -> None:
    """Starts ``cmd`` in its own session (a signal to the test's process group leaves it alone), its output in
    ``log/<name>.out``."""
    with open(cluster.folder / "log" / f"{name}.out", "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    cluster._procs.append((name, proc))


def _await(cluster: SlurmCluster, what: str, ready) -> None:
    """Polls ``ready()`` until it holds; raises naming ``what`` (with every daemon's log tail) past the deadline or
    as soon as a daemon has died."""
    deadline = time.monotonic() + START_DEADLINE_S
    while not ready():
        dead = [(name, proc.returncode) for name, proc in cluster._procs if proc.poll() is not None]
        if dead or time.monotonic() > deadline:
            cause = f"{dead[0][0]} exited with {dead[0][1]}" if dead else f"not within {START_DEADLINE_S} s"
            raise RuntimeError(f"slurm cluster: awaited {what}: {cause}\n{_logs(cluster)}")
        time.sleep(0.1)


def _logs(cluster: SlurmCluster, lines: int = 15) -> str:
    """The last lines of each daemon's output."""
    out = []
    for name, _ in cluster._procs:
        path = cluster.folder / "log" / f"{name}.out"
        text = path.read_text(errors="replace").splitlines()[-lines:] if path.is_file() else []
        out.append(f"--- {name} ---\n" + "\n".join(text))
    return "\n".join(out)


def _take_lock():
    """An exclusive flock on :data:`LOCK`, waiting for another process's cluster to stop."""
    handle = open(LOCK, "a")
    deadline, waited = time.monotonic() + LOCK_DEADLINE_S, False
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if not waited:
                print(f"slurm cluster: waiting for {LOCK} (another cluster runs on this machine)", file=sys.stderr,
                      flush=True)
                waited = True
            if time.monotonic() > deadline:
                handle.close()
                raise RuntimeError(f"slurm cluster: {LOCK} still held by another cluster after {LOCK_DEADLINE_S} s")
            time.sleep(0.5)


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (the kernel's choice; held open together so none repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _succeeds(cmd: list[str], env: dict[str, str]) -> bool:
    return subprocess.run(cmd, env=env, capture_output=True, timeout=30).returncode == 0


def _path() -> str:
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(parts + [p for p in SBIN if p not in parts])


def _user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def _terminate(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL if it has not exited within :data:`STOP_DEADLINE_S`; waits for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _processes_with(entry: str) -> list[int]:
    """Processes (other than this one and its ancestors) whose initial environment holds ``entry``: whatever the
    cluster's daemons started, down to a job's strays that left the job (see the module docstring)."""
    mine, pid = set(), os.getpid()
    while pid > 1:  # this process and its ancestors
        mine.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    wanted, found = b"\0" + entry.encode() + b"\0", []
    for path in Path("/proc").iterdir():
        if path.name.isdigit() and int(path.name) not in mine:
            try:
                if wanted in b"\0" + (path / "environ").read_bytes():
                    found.append(int(path.name))
            except OSError:
                pass
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> None:
    cluster = start()
    try:
        print(f"export SLURM_CONF={cluster.conf}  # partition {cluster.partition}; Enter stops the cluster", flush=True)
        sys.stdin.readline()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
