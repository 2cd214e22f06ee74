"""A one-machine Slurm cluster for tests: munged, mariadbd, slurmdbd, slurmctld and slurmd from Debian's packages.

Everything it writes (munge key, slurm.conf, slurmdbd.conf, database, state, spool, logs) lies under one folder;
the daemons run in the foreground as children of this process, so ``stop`` ends exactly the processes it
started. Clients find the cluster through ``SLURM_CONF`` (see ``env``); the machine's /etc/slurm and
/etc/munge are never read or touched.

Needs root (SlurmUser=root keeps the set-up to one user) and the packages that `.ci/slurm_setup.sh` installs.

Example::

    with LocalSlurmCluster(tmp_path / "slurm") as cluster:
        subprocess.run(["sbatch", "--wrap", "hostname"], env=cluster.env(), check=True)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable

from _slurm_conf import PARTITION, Layout, NodeShape, slurm_conf, slurmdbd_conf

REQUIRED_PROGRAMS = (
    "munged", "munge", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd",
    "sinfo", "sbatch", "squeue", "sacct", "scancel", "scontrol",
)
# Daemons, their slurmstepd children and jobs submitted with `env()` carry this variable, so a leftover process
# of this cluster is found by reading /proc/<pid>/environ, never by a program name that other clusters share.
MARKER_VAR = "BENCH_LOCAL_SLURM_CLUSTER"
ACTIVE_STATES = ("PENDING", "RUNNING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED")
STOP_ORDER = ("slurmd", "slurmctld", "slurmdbd", "mariadbd", "munged")

__all__ = ["ClusterError", "LocalSlurmCluster", "PARTITION", "missing_programs"]


class ClusterError(RuntimeError):
    """The local cluster could not be started; the message carries the daemons' log tails."""


def missing_programs() -> list[str]:
    return [p for p in REQUIRED_PROGRAMS if shutil.which(p) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class LocalSlurmCluster:
    """Slurm with accounting on this host, configured under ``root``; one partition, this host its only node.

    Args:
        root: folder for keys, configuration, database, state, spool and logs (created).
        start_timeout_s: how long ``start`` waits for each daemon to answer.

    Raises:
        ClusterError: from ``start`` when a program is missing, a daemon exits, or the node does not come up;
            every daemon already started is stopped before it is raised.
    """

    def __init__(self, root: Path, start_timeout_s: float = 60.0):
        root = Path(root).resolve()
        self.layout = Layout(
            root=root,
            hostname=socket.gethostname().split(".")[0],
            slurmctld_port=_free_port(),
            slurmd_port=_free_port(),
            slurmdbd_port=_free_port(),
            mariadb_port=_free_port(),
        )
        self.root = root
        self.conf_path = self.layout.etc / "slurm.conf"
        self.start_timeout_s = start_timeout_s
        self._procs: dict[str, subprocess.Popen] = {}

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: os.environ) plus ``SLURM_CONF`` for this cluster, for clients and the jobs they submit."""
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = str(self.conf_path)
        env[MARKER_VAR] = str(self.root)
        return env

    # ---- start ---------------------------------------------------------------------------------------------------
    def start(self) -> LocalSlurmCluster:
        missing = missing_programs()
        if missing:
            raise ClusterError(f"Slurm/munge/MariaDB programs not found: {missing}; run .ci/slurm_setup.sh as root")
        if os.geteuid() != 0:
            raise ClusterError(f"the local Slurm cluster needs root (euid is {os.geteuid()})")
        try:  # jobs see the node by name (SLURM_JOB_NODELIST), e.g. as torchrun's rendezvous host
            socket.gethostbyname(self.layout.hostname)
        except OSError as e:
            raise ClusterError(f"this host's name {self.layout.hostname!r} does not resolve ({e}); "
                               f"add it to /etc/hosts") from e
        try:
            self._write_files()
            self._start_munged()
            self._start_mariadbd()
            self._start_slurm()
        except BaseException:
            self.stop()
            raise
        return self

    def _write_files(self) -> None:
        lo = self.layout
        for folder in (lo.etc, lo.munge_key.parent, lo.log, lo.state, lo.spool):
            folder.mkdir(parents=True, exist_ok=True)
        os.chmod(lo.munge_key.parent, 0o700)
        lo.munge_key.write_bytes(os.urandom(1024))
        os.chmod(lo.munge_key, 0o400)  # munged refuses a key others can read; it runs as root, so root owns it
        self.node = NodeShape.probe()
        self.conf_path.write_text(slurm_conf(lo, self.node))
        dbd_conf = lo.etc / "slurmdbd.conf"  # slurmdbd reads it from SLURM_CONF's folder
        dbd_conf.write_text(slurmdbd_conf(lo))
        os.chmod(dbd_conf, 0o600)  # slurmdbd refuses a config with a password that others can read

    def _start_munged(self) -> None:
        lo = self.layout
        m = lo.munge_key.parent
        self._spawn("munged", ["munged", "-F", "-f", f"--key-file={lo.munge_key}", f"--socket={lo.munge_socket}",
                               f"--pid-file={m / 'munged.pid'}", f"--seed-file={m / 'munged.seed'}"])
        self._wait_for(lo.munge_socket.exists, "munged's socket")

    def _start_mariadbd(self) -> None:
        lo = self.layout
        subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={lo.db_data}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            stdout=open(lo.log / "mariadb-install-db.log", "wb"), stderr=subprocess.STDOUT, check=True,
        )
        self._spawn("mariadbd", [
            "mariadbd", "--no-defaults", f"--datadir={lo.db_data}", "--user=root",
            f"--socket={lo.root / 'mariadb.sock'}", f"--pid-file={lo.state / 'mariadbd.pid'}",
            "--bind-address=127.0.0.1", f"--port={lo.mariadb_port}", "--skip-grant-tables",
            "--innodb-buffer-pool-size=64M", "--skip-log-bin",
        ])
        self._wait_for(lambda: _port_open(lo.mariadb_port), "mariadbd to listen")

    def _start_slurm(self) -> None:
        lo = self.layout
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        self._wait_for(lambda: _port_open(lo.slurmdbd_port), "slurmdbd to listen")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf_path)])
        self._wait_for(lambda: "UP" in self._out(["scontrol", "ping"]), "slurmctld to answer scontrol ping")
        self._spawn("slurmd", ["slurmd", "-D", "-f", str(self.conf_path), "-N", lo.hostname])
        self._wait_for(self.node_idle, "the node to show idle in sinfo")
        # slurmctld registers the cluster with slurmdbd on its own; sacct answers once that has happened.
        self._wait_for(lambda: self._ok(["sacct", "-n", "-X", "-a"]), "sacct to answer")

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.layout.log / f"{name}.stdio.log", "wb") as out:
            self._procs[name] = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, env=self.env(), start_new_session=True
            )

    def _wait_for(self, predicate: Callable[[], bool], what: str, timeout_s: float | None = None) -> None:
        timeout_s = self.start_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = {n: p.returncode for n, p in self._procs.items() if p.poll() is not None}
            if dead:
                raise ClusterError(f"daemon exited while waiting for {what}: {dead}\n{self.log_tails()}")
            if predicate():
                return
            time.sleep(0.25)
        raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}\n{self.log_tails()}")

    # ---- queries -------------------------------------------------------------------------------------------------
    def _ok(self, argv: list[str]) -> bool:
        return subprocess.run(argv, env=self.env(), capture_output=True, timeout=30).returncode == 0

    def _out(self, argv: list[str]) -> str:
        return subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=30).stdout

    def sinfo(self) -> str:
        """One line per node: name, state, CPUs, memory in MB."""
        return self._out(["sinfo", "-N", "-h", "-o", "%N %T %c %m"]).strip()

    def node_idle(self) -> bool:
        return self.sinfo().split()[1:2] == ["idle"]

    def queue(self) -> list[str]:
        """Job ids still pending, running or completing."""
        return self._out(["squeue", "-h", "-o", "%i"]).split()

    def sacct(self, job_ids: list[str] | None = None) -> list[dict[str, str]]:
        """Accounting rows (JobID, JobName, State, ExitCode, NodeList) of allocations, not steps."""
        argv = ["sacct", "-X", "-a", "--parsable2", "-o", "JobID,JobName,State,ExitCode,NodeList"]
        for job_id in job_ids or []:
            argv += ["-j", job_id]
        lines = self._out(argv).splitlines()
        header = lines[0].split("|") if lines else []
        return [dict(zip(header, line.split("|"))) for line in lines[1:]]

    def wait_for_accounting(self, array_id: str, num_tasks: int, timeout_s: float) -> dict[str, dict[str, str]]:
        """sacct rows of the array's tasks, keyed ``<array id>_<task>``, once all ``num_tasks`` have a final state.

        slurmctld sends job records to slurmdbd asynchronously, so sacct can lag behind squeue by a moment.
        """
        rows: dict[str, dict[str, str]] = {}

        def all_final() -> bool:
            rows.clear()
            rows.update({r["JobID"]: r for r in self.sacct([array_id])})
            return len(rows) == num_tasks and all(r["State"] not in ACTIVE_STATES for r in rows.values())

        self._wait_for(all_final, f"sacct to show {num_tasks} finished tasks of array {array_id}", timeout_s)
        return dict(rows)

    def wait_until_queue_empty(self, timeout_s: float) -> None:
        self._wait_for(lambda: not self.queue(), "the queue to drain", timeout_s)

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        for path in sorted(self.layout.log.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"---- {path} (last {len(text)} lines)\n" + "\n".join(text))
        return "\n".join(parts)

    # ---- stop ----------------------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Cancel all jobs, stop the daemons in STOP_ORDER, then kill any leftover carrying this cluster's marker."""
        ctld = self._procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env(), capture_output=True, timeout=30)
        for name in STOP_ORDER:
            proc = self._procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for pid in self.leftover_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftover_pids(self) -> list[int]:
        """Live processes other than this one that carry this cluster's marker (slurmstepd, jobs, daemons)."""
        marker = f"{MARKER_VAR}={self.root}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if marker in environ and state != "Z":
                pids.append(int(entry.name))
        return pids

    def __enter__(self) -> LocalSlurmCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
