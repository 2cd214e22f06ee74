"""Configuration files of the one-node test cluster: slurm.conf and slurmdbd.conf, as text from explicit values."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

PARTITION = "debug"
CLUSTER_NAME = "benchtest"


@dataclass(frozen=True)
class NodeShape:
    """This machine as slurmd sees it (``slurmd -C``), with memory trimmed so the OS keeps a share."""

    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mb: int

    @classmethod
    def probe(cls, memory_fraction: float = 0.5) -> NodeShape:
        out = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
        fields = dict(tok.split("=", 1) for tok in out.split() if "=" in tok)
        return cls(
            cpus=int(fields["CPUs"]),
            sockets=int(fields["SocketsPerBoard"]) * int(fields.get("Boards", 1)),
            cores_per_socket=int(fields["CoresPerSocket"]),
            threads_per_core=int(fields["ThreadsPerCore"]),
            real_memory_mb=int(int(fields["RealMemory"]) * memory_fraction),
        )


@dataclass(frozen=True)
class Layout:
    """Where the cluster's files and ports are; every path lies under ``root``."""

    root: Path
    hostname: str
    slurmctld_port: int
    slurmd_port: int
    slurmdbd_port: int
    mariadb_port: int

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.root / "munge" / "munge.key"

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def state(self) -> Path:
        return self.root / "state"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def db_data(self) -> Path:
        return self.root / "mariadb"


def slurm_conf(layout: Layout, node: NodeShape) -> str:
    lo = layout
    return f"""\
# Written by tests/slurm for one test session; this host is the only node.
ClusterName={CLUSTER_NAME}
SlurmctldHost={lo.hostname}(127.0.0.1)
SlurmctldPort={lo.slurmctld_port}
SlurmdPort={lo.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={lo.munge_socket}
StateSaveLocation={lo.state}
SlurmdSpoolDir={lo.spool}/%n
SlurmctldPidFile={lo.state}/slurmctld.pid
SlurmdPidFile={lo.spool}/slurmd.pid
SlurmctldLogFile={lo.log}/slurmctld.log
SlurmdLogFile={lo.log}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: a container's cgroup tree is often read-only or mixed v1/v2.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
# submitit reads job states with sacct, which needs slurmdbd; without it a job that dies before writing its
# result (killed, out of memory, node lost) would look UNKNOWN, i.e. still running, forever.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={lo.slurmdbd_port}
# For accounting_storage/slurmdbd this names the munge socket to authenticate with (AuthInfo does not reach it).
AccountingStoragePass={lo.munge_socket}
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that asks for no memory gets the whole node and the next job waits for it.
DefMemPerCPU=1024
SchedulerType=sched/backfill
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=600
KillWait=5
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
Waittime=0
NodeName={lo.hostname} NodeAddr=127.0.0.1 CPUs={node.cpus} Sockets={node.sockets} \
CoresPerSocket={node.cores_per_socket} ThreadsPerCore={node.threads_per_core} RealMemory={node.real_memory_mb} \
State=UNKNOWN
PartitionName={PARTITION} Nodes={lo.hostname} Default=YES MaxTime=INFINITE State=UP
"""


def slurmdbd_conf(layout: Layout) -> str:
    lo = layout
    # The private mariadbd runs with --skip-grant-tables on 127.0.0.1 only, so any user/password is accepted.
    return f"""\
AuthType=auth/munge
AuthInfo=socket={lo.munge_socket}
DbdHost={lo.hostname}
DbdAddr=127.0.0.1
DbdPort={lo.slurmdbd_port}
SlurmUser=root
PidFile={lo.state}/slurmdbd.pid
LogFile={lo.log}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={lo.mariadb_port}
StorageUser=root
StoragePass=unused
StorageLoc=slurm_acct_db
"""
