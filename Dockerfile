# The team image: JupyterLab with the GPU monitor, the magics and the tutorials, on an official
# PyTorch CUDA runtime image; runs as a non-root user with token auth; sshd (key-only) only when
# asked (JUPYTER_GPU_SSHD=1). Build the wheel first (it carries the built labextension):
#
#   python -m build --wheel && docker build -t jupyter-gpu .
#   docker run --gpus all -p 8888:8888 -e JUPYTER_TOKEN="$(openssl rand -hex 32)" \
#              -v jupyter-gpu-cache:/cache jupyter-gpu
#
# docs/deploy.md has the JupyterHub (KubeSpawner), reverse proxy and Prometheus parts.
ARG BASE_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
FROM ${BASE_IMAGE}

ARG NB_USER=jovyan
ARG NB_UID=1000

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# tini reaps kernels' orphans as PID 1; openssh-server only runs when JUPYTER_GPU_SSHD=1.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini openssh-server \
    && rm -rf /var/lib/apt/lists/* \
    && rm -f /etc/ssh/ssh_host_*_key* \
    && useradd --create-home --uid "${NB_UID}" --shell /bin/bash "${NB_USER}" \
    && mkdir -p /cache/torchinductor /cache/triton \
    && chown -R "${NB_UID}:${NB_UID}" /cache

# The package from the wheel (torch is already there: pip keeps the base image's build), and
# docker/requirements.txt: jupyterhub (pinned) for jupyterhub-singleuser when a hub spawns it.
COPY dist/ /tmp/dist/
COPY docker/requirements.txt /tmp/requirements.txt
RUN python -m pip install --no-cache-dir --requirement /tmp/requirements.txt \
        /tmp/dist/jupyter_gpu-*.whl \
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
