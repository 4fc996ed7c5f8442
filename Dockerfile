# The team image: JupyterLab with the GPU monitor, the magics and the tutorials, on an official
# PyTorch CUDA runtime image; runs as a non-root user with token auth; sshd (key-only) only when
# asked (JUPYTER_GPU_SSHD=1). Build the wheel first (it carries the built labextension):
#
#   python -m build --wheel && docker build -t jupyter-gpu .
#   docker run --gpus all --shm-size=8g -p 8888:8888 \
#              -e JUPYTER_TOKEN="$(openssl rand -hex 32)" -v jupyter-gpu-cache:/cache jupyter-gpu
#
# --shm-size: docker gives /dev/shm 64 MiB, too little for DataLoader workers (they hand batches
# over through it: notebook 04) and for NCCL's shared-memory transport between ranks
# (%%torchrun, notebook 05). docs/deploy.md has the same for Kubernetes (a memory-backed
# emptyDir on /dev/shm), and the JupyterHub (KubeSpawner), reverse proxy and Prometheus parts.
ARG BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ARG NB_USER=jovyan
ARG NB_UID=1000

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# tini reaps kernels' orphans as PID 1; openssh-server only runs when JUPYTER_GPU_SSHD=1.
# gcc and g++: torch.compile compiles at run time. Triton builds a small C launcher for each
# kernel it generates (gcc), and Inductor's CPU code is C++ (g++). The official runtime images
# up to 2.9.x have no compiler, so torch.compile fails there (pytorch/pytorch#116696); a later
# image adds gcc (pytorch/pytorch#170235, merged 2025-12-17; which release tags carry it was not
# checked here), not g++. Installed here, they work on any BASE_IMAGE (about 190 MB).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini openssh-server gcc g++ \
    && rm -rf /var/lib/apt/lists/* \
    && rm -f /etc/ssh/ssh_host_*_key* \
    && useradd --create-home --uid "${NB_UID}" --shell /bin/bash "${NB_USER}" \
    && mkdir -p /cache/torchinductor /cache/triton \
    && chown -R "${NB_UID}:${NB_UID}" /cache

# The package from the wheel with its lab extra (JupyterLab, which the entrypoint runs) and
# tutorials extra (what the notebooks use; torch is already there: pip keeps the base image's
# build), and docker/requirements.txt: jupyterhub (pinned) for jupyterhub-singleuser when a hub
# spawns it. tests/unit/docker/test_image_python.py checks these against pyproject.toml.
COPY dist/ /tmp/dist/
COPY docker/requirements.txt /tmp/requirements.txt
RUN wheel="$(echo /tmp/dist/jupyter_gpu-*.whl)" \
    && python -m pip install --no-cache-dir --requirement /tmp/requirements.txt \
        "${wheel}[lab,tutorials]" \
    && rm -rf /tmp/dist /tmp/requirements.txt

COPY --chmod=755 docker/entrypoint.sh /usr/local/bin/jupyter-gpu-entrypoint
COPY --chmod=755 docker/healthcheck.sh /usr/local/bin/jupyter-gpu-healthcheck

# The compile caches live on a volume: they survive restarts, and the monitor (which reads
# these variables) shows their size.
ENV TORCHINDUCTOR_CACHE_DIR=/cache/torchinductor \
    TRITON_CACHE_DIR=/cache/triton \
    JUPYTER_PORT=8888
VOLUME ["/cache"]

USER ${NB_UID}
WORKDIR /home/${NB_USER}
EXPOSE 8888 2222

HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/jupyter-gpu-healthcheck"]

ENTRYPOINT ["tini", "--", "/usr/local/bin/jupyter-gpu-entrypoint"]
