#!/usr/bin/env bash
# Two hosts on one Linux machine, to run `mpiexec` across a real network link (docs/training.md,
# "Two hosts"). Needs root (network namespaces), iproute2, unshare and OpenSSH's server
# (Debian: apt-get install openssh-server).
#
#   scripts/two_hosts.sh up FOLDER       # host B comes up; FOLDER receives the keys and files below
#   source FOLDER/env                    # mpiexec now reaches host B through FOLDER/ssh
#   mpiexec -f FOLDER/hosts.mpich -n 2 …                  # MPICH: rank 0 on host A, rank 1 on host B
#   mpiexec --hostfile FOLDER/hosts.openmpi -n 2 …        # Open MPI
#   scripts/two_hosts.sh down FOLDER     # host B's sshd stopped, its namespace and link removed
#
# Host A is this machine as it is (its hostname, its file system) with the address 10.77.0.1
# on one end of a virtual Ethernet pair (veth); host B is a network namespace holding the other
# end, 10.77.0.2, with a hostname of its own ("hostb", a UTS namespace) and an sshd that lets
# root in with a key made here. The two see one file system, as hosts sharing an NFS home would:
# the same Python environment, and rank 0's run folder. With FOLDER/env's UCX_TLS=tcp,self every
# byte between rank 0 and rank 1 crosses the veth (`ip -s link show veth-hostb` counts them);
# without it MPICH's UCX finds the one kernel and uses shared memory (measured: 33 kB over the
# link for 7 steps of a model with 91 kB of gradients, against 666 kB with it).
#
# TWO_HOSTS_NAME (default hostb) names the namespace, host B's hostname and the link
# (veth-NAME here, eth-NAME in host B); TWO_HOSTS_NET (default 10.77.0) its /24 network.
set -euo pipefail

name="${TWO_HOSTS_NAME:-hostb}"
net="${TWO_HOSTS_NET:-10.77.0}"
host_a="$net.1" host_b="$net.2"

usage() {
    echo "usage: $0 up|down FOLDER (root; see the comment at the top of $0)" >&2
    exit 2
}

[ $# -eq 2 ] || usage
action="$1"
folder="$(mkdir -p "$2" && cd "$2" && pwd)"

up() {
    [ "$(id -u)" -eq 0 ] || { echo "$0: network namespaces need root: run it as root (sudo $0 up $folder)" >&2; exit 1; }
    for tool in ip unshare ssh ssh-keygen; do
        command -v "$tool" >/dev/null || { echo "$0: $tool is missing: install iproute2, util-linux and openssh-client" >&2; exit 1; }
    done
    [ -x /usr/sbin/sshd ] || { echo "$0: /usr/sbin/sshd is missing: apt-get install openssh-server" >&2; exit 1; }
    # FOLDER holds only what this script writes: a folder it did not make is refused unless empty
    if [ ! -e "$folder/.two-hosts" ] && [ -n "$(ls -A "$folder")" ]; then
        echo "$0: $folder is not empty and was not made by $0: give a new or empty folder" >&2
        exit 1
    fi
    if ip netns list | grep -qw "$name"; then
        echo "$0: a namespace $name exists already: $0 down $folder first (or set TWO_HOSTS_NAME)" >&2
        exit 1
    fi

    : > "$folder/.two-hosts"
    # the link: host A's end here, host B's end moved into its namespace
    ip netns add "$name"
    ip link add "veth-$name" type veth peer name "eth-$name"
    ip link set "eth-$name" netns "$name"
    ip addr add "$host_a/24" dev "veth-$name"
    ip link set "veth-$name" up
    ip netns exec "$name" ip addr add "$host_b/24" dev "eth-$name"
    ip netns exec "$name" ip link set "eth-$name" up
    ip netns exec "$name" ip link set lo up

    # host B's sshd: its own host key, root's login by the key made here only
    rm -f "$folder/host_key" "$folder/host_key.pub" "$folder/client_key" "$folder/client_key.pub" "$folder/known_hosts"
    ssh-keygen -q -t ed25519 -N '' -C "host key of $name" -f "$folder/host_key"
    ssh-keygen -q -t ed25519 -N '' -C "mpiexec to $name" -f "$folder/client_key"
    cp "$folder/client_key.pub" "$folder/authorized_keys"
    chmod 600 "$folder/authorized_keys"
    cat > "$folder/sshd_config" <<EOF
ListenAddress $host_b
HostKey $folder/host_key
PidFile $folder/sshd.pid
AuthorizedKeysFile $folder/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
EOF
    mkdir -p /run/sshd                                 # sshd's privilege separation directory
    ip netns exec "$name" unshare --uts sh -c "hostname $name && exec /usr/sbin/sshd -f $folder/sshd_config -E $folder/sshd.log"

    # how mpiexec reaches host B: ssh with that key, host B's key learnt on first use
    cat > "$folder/ssh" <<EOF
#!/bin/sh
exec ssh -i $folder/client_key -o UserKnownHostsFile=$folder/known_hosts -o StrictHostKeyChecking=accept-new -o BatchMode=yes "\$@"
EOF
    chmod +x "$folder/ssh"
    printf '%s:1\n%s:1\n' "$host_a" "$host_b" > "$folder/hosts.mpich"
    printf '%s slots=1\n%s slots=1\n' "$host_a" "$host_b" > "$folder/hosts.openmpi"
    cat > "$folder/env" <<EOF
# MPICH's mpiexec (hydra) and Open MPI's (PRRTE) start host B's processes with this ssh; UCX
# (MPICH's network module) takes two hosts of one kernel for one node and would use shared
# memory between them: TCP only, so that the messages cross the link
export HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=$folder/ssh PRTE_MCA_plm_ssh_agent=$folder/ssh UCX_TLS=tcp,self
EOF
    local seen
    seen="$("$folder/ssh" "$host_b" hostname)"
    echo "host A: $(hostname) at $host_a; host B: $seen at $host_b (namespace $name, sshd pid $(cat "$folder/sshd.pid"))"
    echo "next: source $folder/env, then mpiexec -f $folder/hosts.mpich -n 2 … (MPICH) or mpiexec --hostfile $folder/hosts.openmpi -n 2 … (Open MPI)"
}

down() {
    if [ -f "$folder/sshd.pid" ]; then
        kill "$(cat "$folder/sshd.pid")" 2>/dev/null || true
        rm -f "$folder/sshd.pid"
    fi
    if ip netns list | grep -qw "$name"; then
        ip netns delete "$name"                        # its end of the link goes, and with it ours
    fi
    ip link delete "veth-$name" 2>/dev/null || true
    echo "host B ($name) is down"
}

case "$action" in
    up) up ;;
    down) down ;;
    *) usage ;;
esac
