#!/usr/bin/env bash
# The team image's entrypoint: runs JupyterLab (with the GPU monitor) as the image's non-root
# user with token auth, and, only when asked, a key-only sshd for editors that connect over SSH.
#
#   docker run --gpus all -p 8888:8888 -e JUPYTER_TOKEN=... -v cache:/cache IMAGE
#   docker run ... -e JUPYTER_GPU_SSHD=1 -e SSH_AUTHORIZED_KEYS="$(cat ~/.ssh/id_ed25519.pub)" \
#              -p 2222:2222 IMAGE
#   docker run ... IMAGE jupyterhub-singleuser   # under a hub (KubeSpawner sets the command)
#
# Environment:
#   JUPYTER_TOKEN         the login token (at least 16 characters); unset: Jupyter makes one and
#                         prints it in the log. Never an empty token: that would switch auth off.
#   JUPYTER_PORT          default 8888; NOTEBOOK_DIR default $HOME/work.
#   JUPYTER_GPU_SSHD      1: also run sshd (as this user, key-only) on SSHD_PORT (default 2222)
#                         with the keys of SSH_AUTHORIZED_KEYS (or ~/.ssh/authorized_keys).
#   TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR   made if missing (the image puts them on /cache).
#   JUPYTER_GPU_ENTRYPOINT_DRY_RUN=1   print what would run, one argument a line, and exit
#                         (tests run this script outside Docker this way).
set -euo pipefail

die() {
  echo "entrypoint: $*" >&2
  exit 1
}

run() {
  if [ "${JUPYTER_GPU_ENTRYPOINT_DRY_RUN:-}" = 1 ]; then
    printf '%s\n' "$@"
    printf '%s\n' "--"
  else
    "$@"
  fi
}

if [ "$(id -u)" = 0 ]; then
  die "refusing to run as root: run as the image's user (USER jovyan, or --user 1000)"
fi

for dir in "${TORCHINDUCTOR_CACHE_DIR:-}" "${TRITON_CACHE_DIR:-}"; do
  if [ -n "$dir" ]; then
    mkdir -p "$dir" || die "cannot create the compile cache directory $dir"
  fi
done

if [ "${JUPYTER_GPU_SSHD:-0}" = 1 ]; then
  sshd_bin=${SSHD_BIN:-/usr/sbin/sshd}
  sshd_dir=${SSHD_DIR:-$HOME/.sshd}
  keys_file=$HOME/.ssh/authorized_keys
  mkdir -p "$HOME/.ssh" "$sshd_dir"
  chmod 700 "$HOME/.ssh" "$sshd_dir"
  if [ -n "${SSH_AUTHORIZED_KEYS:-}" ]; then
    printf '%s\n' "$SSH_AUTHORIZED_KEYS" >"$keys_file"
  fi
  if [ ! -s "$keys_file" ] || ! grep -qE '^(ssh|ecdsa|sk)-' "$keys_file"; then
    die "JUPYTER_GPU_SSHD=1 needs a public key: set SSH_AUTHORIZED_KEYS or mount $keys_file (passwords are never accepted)"
  fi
  chmod 600 "$keys_file"
  if [ ! -f "$sshd_dir/ssh_host_ed25519_key" ]; then
    ssh-keygen -q -t ed25519 -N '' -f "$sshd_dir/ssh_host_ed25519_key"
  fi
  cat >"$sshd_dir/sshd_config" <<CONFIG
# Written by the entrypoint: key-only, this user only, no root, no forwarding of agents or X11.
Port ${SSHD_PORT:-2222}
HostKey $sshd_dir/ssh_host_ed25519_key
PidFile $sshd_dir/sshd.pid
AuthorizedKeysFile $keys_file
AllowUsers $(id -un)
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
PermitRootLogin no
UsePAM no
AllowAgentForwarding no
X11Forwarding no
PermitUserEnvironment no
StrictModes yes
Subsystem sftp internal-sftp
CONFIG
  run "$sshd_bin" -f "$sshd_dir/sshd_config" -E "$sshd_dir/sshd.log"
fi

if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  # A command (jupyterhub-singleuser from a spawner, bash, ...): run it as given.
  run exec "$@"
  exit 0
fi

notebook_dir=${NOTEBOOK_DIR:-$HOME/work}
mkdir -p "$notebook_dir"
args=(jupyter lab --no-browser --ServerApp.ip=0.0.0.0 "--ServerApp.port=${JUPYTER_PORT:-8888}"
  "--ServerApp.root_dir=$notebook_dir")
if [ -n "${JUPYTER_TOKEN+set}" ]; then
  if [ "${#JUPYTER_TOKEN}" -lt 16 ]; then
    die "JUPYTER_TOKEN must be at least 16 characters (e.g. openssl rand -hex 32); unset it to have Jupyter make one"
  fi
  # Passed through the environment Jupyter reads, not argv: a command line is visible in ps.
  export JUPYTER_TOKEN
fi
run exec "${args[@]}" "$@"
