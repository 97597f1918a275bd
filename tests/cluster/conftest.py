"""A real one-node SLURM cluster on this host, for the session: Debian's slurmctld, slurmd,
slurm-client and munge (installed with apt-get when missing), started by hand without systemd
and stopped by pid afterwards. Needs root, as CI and the development machines have."""

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
COMMANDS = ["slurmctld", "slurmd", "sbatch", "munged"]  # present once PACKAGES are installed
# Clients (sbatch, squeue and srun inside the jobs) read the default path: the executor plugin
# removes SLURM_CONF from a job's environment.
CONF = Path("/etc/slurm/slurm.conf")
MARK = "# Written by dynalloc's tests/cluster; removed when they end.\n"
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_RUN = Path("/run/munge")
PIDS = Path("/run/dynalloc-slurm")
PID_FILES = {  # stopped in this order
    "slurmd": PIDS / "slurmd.pid",
    "slurmctld": PIDS / "slurmctld.pid",
    "munged": MUNGE_RUN / "munged.pid",
}


def run(*command, env=None):
    """Run a setup command; fail the session, naming it, when it fails."""
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines() or ["no output"]
        pytest.fail(f"{' '.join(command)} failed ({result.returncode}): {lines[-1]}")
    return result.stdout


def install():
    if all(shutil.which(command) for command in COMMANDS):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run("apt-get", "update", "-q", env=env)
    run("apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES, env=env)


def stop(name):
    """Stop the daemon whose pid file is PID_FILES[name], if it runs (also one left behind)."""
    pid_file = PID_FILES[name]
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    comm = Path(f"/proc/{pid}/comm")
    if comm.exists() and comm.read_text().strip() == name:  # not a recycled pid
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while comm.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if comm.exists():
            pytest.fail(f"{name} (pid {pid}) did not stop within 30 s of SIGTERM")
    pid_file.unlink(missing_ok=True)


def slurm_conf(state):
    host = socket.gethostname().split(".")[0]
    node = run("slurmd", "-C").splitlines()[0]  # NodeName=<host> CPUs=... RealMemory=...
    return MARK + "\n".join(
        [
            "ClusterName=dynalloc-test",
            f"SlurmctldHost={host}(127.0.0.1)",
            "SlurmUser=root",
            f"StateSaveLocation={state}/slurmctld",
            f"SlurmdSpoolDir={state}/slurmd",
            f"SlurmctldPidFile={PID_FILES['slurmctld']}",
            f"SlurmdPidFile={PID_FILES['slurmd']}",
            f"SlurmctldLogFile={state}/slurmctld.log",
            f"SlurmdLogFile={state}/slurmd.log",
            # No cgroups and no systemd here: track processes by their parents, bind no cores.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            # No default MPI plugin, so that the profile's `srun --mpi=pmi2` is what is tested.
            "MpiDefault=none",
            # No accounting database: sacct fails, squeue must keep finished jobs visible.
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MinJobAge=600",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            f"{node} NodeAddr=127.0.0.1 State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
    )


def wait_until_idle(state, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        node = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True)
        if node.stdout.strip() == "idle":
            return
        time.sleep(0.5)
    pytest.fail(
        f"the SLURM node is {node.stdout.strip() or node.stderr.strip()!r}, not idle, "
        f"{timeout} s after slurmd started; see {state}/slurmd.log and {state}/slurmctld.log"
    )


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running one-node cluster, its only partition the default one."""
    install()
    for name in PID_FILES:
        stop(name)
    if CONF.exists() and not CONF.read_text().startswith(MARK):
        pytest.fail(f"{CONF} exists and was not written by these tests; move it away to run them")
    state = tmp_path_factory.mktemp("slurm")
    CONF.write_text(slurm_conf(state))
    if not MUNGE_KEY.exists():
        run("runuser", "-u", "munge", "--", "mungekey", "--create")
    MUNGE_RUN.mkdir(exist_ok=True)
    shutil.chown(MUNGE_RUN, "munge", "munge")
    PIDS.mkdir(exist_ok=True)
    try:
        run("runuser", "-u", "munge", "--", "munged")
        run("slurmctld")
        run("slurmd")
        wait_until_idle(state)
        yield
    finally:
        for name in PID_FILES:
            stop(name)
        CONF.unlink()
