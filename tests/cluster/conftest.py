"""A real two-node SLURM cluster on this host, for the session.

Debian's slurmctld, slurmd, slurm-client and munge (installed with apt-get when missing, with
iproute2's `ip`) are started by hand without systemd and stopped by pid afterwards; it needs
root, as CI and the development machines have. Each compute node is a network namespace and a
UTS namespace of its own: its own hostname (n1, n2) and address, joined to a bridge in the root
namespace by a veth pair. The subnet is ours, the namespaces have no default route and
forwarding stays off, so nothing leaves them. The namespaces, the bridge and the daemons are
removed when the session ends, also after a failure, and any left by an earlier session are
removed first.

What it cost to learn (see also ../shared/DESIGN.md's facts):
- slurmd must start as `nsenter --net=/run/netns/NODE unshare --uts sh -c 'hostname NODE; exec
  slurmd'`: `ip netns exec` remounts /sys, hides /sys/fs/cgroup, and slurmd then refuses to start.
  Its tasks inherit both namespaces, so a rank's hostname is its node's.
- slurmctld and munged stay in the root namespace: the nodes reach slurmctld at the bridge's
  address (`SlurmctldHost=<host>(<bridge address>)`), and munged through its socket file, which
  network namespaces do not hide. `%n` in SlurmdSpoolDir, SlurmdPidFile and SlurmdLogFile keeps
  the nodes' files apart.
- PyPI's MPICH takes the namespaced nodes for one host: its default netmod, UCX, moves their data
  through shared memory (0 bytes on the veths). UCX_TLS=tcp,self forces TCP, but UCX's large
  addresses, exchanged through SLURM 22.05's pmi2 plugin, made about one start in 20 fail under
  load (slurmstepd: "request not begin with 'cmd='" and MPI_Init hanging, UCX "failed to unpack
  address, invalid bandwidth 0.00", the shm bootstrap "Out of memory"). The wheel's other netmod,
  libfabric's tcp provider (`CLUSTER_ENV`: MPIR_CVAR_CH4_NETMOD=ofi, FI_PROVIDER=tcp), started
  20 times in 20 under the same load and sends the ranks' traffic over the veths (21 MB on n2's
  link for 5 allreduces of 4 MB across 4 ranks).
- Job ids restart with every session's empty state, and MPICH names its shared memory after the
  job: a segment that a killed job left in /dev/shm (one for every node here) made the next job
  of that id spin in MPI_Init for good. `FirstJobId` from the clock keeps ids apart.
- A node whose link goes down keeps its job steps: srun waits for them, and slurmctld marks the
  node DOWN only after SlurmdTimeout (300 s by default). After the link returns the node may be
  drained ("Kill task failed"): `Cluster.resume` returns it to service.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge", "iproute2"]
COMMANDS = ["slurmctld", "slurmd", "sbatch", "munged", "ip"]  # present once PACKAGES are installed
# Clients (sbatch, squeue and srun inside the jobs) read the default path: the executor plugin
# removes SLURM_CONF from a job's environment.
CONF = Path("/etc/slurm/slurm.conf")
MARK = "# Written by dynalloc's tests/cluster; removed when they end.\n"
MUNGE_KEY = Path("/etc/munge/munge.key")
MUNGE_RUN = Path("/run/munge")
PIDS = Path("/run/dynalloc-slurm")
BRIDGE, SUBNET = "dynalloc0", "10.250.21"  # a /24 of our own; the bridge is .1
NODES = {"n1": f"{SUBNET}.11", "n2": f"{SUBNET}.12"}
NAMESPACE = "dynalloc-{}"  # the network namespace of a node, and its veth's name on the bridge
HARDWARE = ("CPUs=", "RealMemory=")  # each node declares the host's: the nodes share them
PID_FILES = {  # stopped in this order
    **{f"slurmd {node}": PIDS / f"slurmd-{node}.pid" for node in NODES},
    "slurmctld": PIDS / "slurmctld.pid",
    "munged": MUNGE_RUN / "munged.pid",
}
# What the tests' snakemake passes to its jobs: MPI between nodes over TCP, as between hosts.
CLUSTER_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


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
    if comm.exists() and comm.read_text().strip() == name.split()[0]:  # not a recycled pid
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while comm.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if comm.exists():
            pytest.fail(f"{name} (pid {pid}) did not stop within 30 s of SIGTERM")
    pid_file.unlink(missing_ok=True)


def ip(*args):
    return run("ip", *args)


def remove_network():
    """The namespaces (their veths go with them) and the bridge, where they exist. A process a
    job left inside a namespace (a step that never ended) is killed by its pid first: the
    namespace, and the veth in it, would live as long as it does."""
    existing = ip("netns", "list")
    for node in NODES:
        namespace = NAMESPACE.format(node)
        if namespace in existing.split():
            for pid in ip("netns", "pids", namespace).split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            ip("netns", "delete", namespace)
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode == 0:
        ip("link", "delete", BRIDGE)


def make_network():
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")
    for node, address in NODES.items():
        namespace = NAMESPACE.format(node)
        ip("netns", "add", namespace)
        ip("link", "add", namespace, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        ip("link", "set", namespace, "master", BRIDGE, "up")
        ip("-n", namespace, "addr", "add", f"{address}/24", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")
        ip("-n", namespace, "link", "set", "lo", "up")


def slurm_conf(state):
    host = socket.gethostname().split(".")[0]
    # CPUs=... RealMemory=... of this host (the first line of `slurmd -C`): every node has it all.
    hardware = [word for word in run("slurmd", "-C").split() if word.startswith(HARDWARE)]
    return MARK + "\n".join(
        [
            "ClusterName=dynalloc-test",
            f"SlurmctldHost={host}({SUBNET}.1)",
            "SlurmUser=root",
            f"StateSaveLocation={state}/slurmctld",
            f"SlurmdSpoolDir={state}/slurmd-%n",
            f"SlurmctldPidFile={PID_FILES['slurmctld']}",
            f"SlurmdPidFile={PIDS}/slurmd-%n.pid",
            f"SlurmctldLogFile={state}/slurmctld.log",
            f"SlurmdLogFile={state}/slurmd-%n.log",
            # No cgroups and no systemd here: track processes by their parents, bind no cores.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            # No default MPI plugin, so that the profile's `srun --mpi=pmi2` is what is tested.
            "MpiDefault=none",
            # No accounting database: sacct fails, squeue must keep finished jobs visible.
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "MinJobAge=600",
            # Job ids unique across sessions (each starts with an empty state): MPICH names its
            # shared memory after the job, and a segment a killed job left in /dev/shm (shared by
            # the namespaced nodes) hangs the next job of that id in MPI_Init.
            f"FirstJobId={1 + int(time.time()) % 60_000_000}",
            "ReturnToService=2",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            *(
                f"NodeName={node} NodeAddr={address} {' '.join(hardware)} State=UNKNOWN"
                for node, address in NODES.items()
            ),
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        ]
    )


def node_states():
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True)
    return dict(line.split() for line in sinfo.stdout.splitlines() if line.strip())


class Cluster:
    """The running cluster: its nodes, their links, their state."""

    nodes = NODES

    def __init__(self, state):
        self.state = state

    def link(self, node, up):
        """Set `node`'s link (its veth on the bridge) up or down: a cut cable, a dead switch."""
        ip("link", "set", NAMESPACE.format(node), "up" if up else "down")

    def wait_until_idle(self, timeout=60):
        """Every node idle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            states = node_states()
            if states and all(state == "idle" for state in states.values()):
                return
            time.sleep(0.5)
        pytest.fail(
            f"the SLURM nodes are {node_states()}, not idle, {timeout} s on; see "
            f"{self.state}/slurmd-*.log and {self.state}/slurmctld.log"
        )

    def return_to_service(self):
        """Resume the nodes that a fault left drained or down (what an administrator does)."""
        for node, state in node_states().items():
            if state.startswith(("drain", "down")):
                subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"])


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """A running two-node cluster, its only partition the default one."""
    install()
    for name in PID_FILES:
        stop(name)
    remove_network()
    if CONF.exists() and not CONF.read_text().startswith(MARK):
        pytest.fail(f"{CONF} exists and was not written by these tests; move it away to run them")
    state = tmp_path_factory.mktemp("slurm")
    for node in NODES:
        (state / f"slurmd-{node}").mkdir()
    if not MUNGE_KEY.exists():
        run("runuser", "-u", "munge", "--", "mungekey", "--create")
    MUNGE_RUN.mkdir(exist_ok=True)
    shutil.chown(MUNGE_RUN, "munge", "munge")
    PIDS.mkdir(exist_ok=True)
    began = time.monotonic()
    try:
        make_network()
        CONF.write_text(slurm_conf(state))
        run("runuser", "-u", "munge", "--", "munged")
        run("slurmctld")
        for node in NODES:
            namespace = f"--net=/run/netns/{NAMESPACE.format(node)}"
            run("nsenter", namespace, "unshare", "--uts", "sh", "-c", f"hostname {node}; slurmd")
        cluster = Cluster(state)
        cluster.wait_until_idle()
        print(f"\nthe two-node cluster started in {time.monotonic() - began:.2f} s")
        yield cluster
    finally:
        for name in PID_FILES:
            stop(name)
        remove_network()
        CONF.unlink(missing_ok=True)


@pytest.fixture
def started():
    """The pipelines a test starts; one still running at the end (a failed test) is stopped as
    Ctrl-C stops it, which cancels its SLURM jobs."""
    pipelines = []
    yield pipelines
    for pipeline in pipelines:
        if pipeline.job.poll() is None:
            pipeline.job.send_signal(signal.SIGINT)
            try:
                pipeline.job.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(pipeline.job.pid, signal.SIGKILL)
                pipeline.job.wait()
